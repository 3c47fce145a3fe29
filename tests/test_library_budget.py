"""The library under a latency budget (issue 45): closing, cancelling and sharing checkers.

Every test runs on ``ScriptedBackend`` (``tests.scripted``), never a model.
"""

from __future__ import annotations

import pytest

from conli import Checker, Settings
from conli.backends.fake import ScriptedBackend
from tests import scripted

SOURCE = "The library opened in 1962. It lends books free of charge."
DETECT = {"mitigate": False, "judge": False, "word_scores": "off"}


class _Closing(ScriptedBackend):
    """The scripted model, counting how often it is closed."""

    def __init__(self) -> None:
        super().__init__(responder=scripted.responder(), judges_batches=True)
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_a_checker_is_a_context_manager_that_closes_once() -> None:
    backend = _Closing()
    with Checker(Settings(**DETECT), backend=backend) as checker:  # type: ignore[arg-type]
        assert checker.check(SOURCE, "It opened in 1962.").verdict == "supported"
        assert backend.closed == 0
    assert backend.closed == 1
    checker.close()  # a second close does nothing
    assert backend.closed == 1


def test_a_checker_closes_when_the_block_raises() -> None:
    backend = _Closing()
    with pytest.raises(KeyError), Checker(Settings(**DETECT), backend=backend):  # type: ignore[arg-type]
        raise KeyError("the caller's error goes on")
    assert backend.closed == 1

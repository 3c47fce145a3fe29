"""What operators read on the ``conli.*`` loggers: retries, re-asks, unverified answers, the bar.

Each through ``Checker.check`` on a scripted backend; the lines name the step and the kind
of failure, never the texts checked nor a key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from conli import Checker, Settings
from conli.backends.base import Message
from conli.backends.fake import Reply, ScriptedBackend
from conli.errors import RateLimitError
from tests.support import scripted
from tests.support.fake_clock import FakeClock

SOURCE = "The library opened in 1962. It lends books free of charge."
RESPONSE = "The library opened in 1962."
SECRET = "sk-test-0123456789"
DETECT = {"detectors": ["cot"], "entity_level": False, "mitigate": False, "judge": False,
          "word_scores": "off"}


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[pytest.LogCaptureFixture]:
    """Every ``conli.*`` record at DEBUG (propagating, whatever a service test set)."""
    monkeypatch.setattr(logging.getLogger("conli"), "propagate", True)
    with caplog.at_level(logging.DEBUG, logger="conli"):
        yield caplog


def _check(first: list[Reply]) -> tuple[Checker, object]:
    """Check RESPONSE; the backend's first calls answer ``first``, the rest as a model would."""
    model = scripted.responder()
    queue = list(first)

    def respond(messages: list[Message]) -> Reply:
        if queue:
            return queue.pop(0)
        if messages[-1]["content"].startswith("Your answer could not be used"):
            messages = messages[:-2]  # a re-ask: answer the question it repeats
        return model(messages)

    backend = ScriptedBackend(responder=respond, judges_batches=True)
    checker = Checker(Settings(**DETECT), backend=backend)  # type: ignore[arg-type]
    return checker, checker.check(SOURCE, RESPONSE)


def _from(logs: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in logs.records if r.name == name]


def _no_texts(logs: pytest.LogCaptureFixture) -> None:
    for record in logs.records:
        message = record.getMessage()
        assert SOURCE not in message and RESPONSE not in message and SECRET not in message


def test_a_retried_429_is_logged_with_its_attempt_kind_and_wait(
        logs: pytest.LogCaptureFixture, clock: FakeClock) -> None:
    limited = RateLimitError(f"429 for key {SECRET}", retry_after=2.0)
    _checker, result = _check([limited, limited])
    assert result.verdict == "supported"  # type: ignore[attr-defined]
    retries = _from(logs, "conli.backends.retry")
    assert len(retries) == 2 and all(r.levelno == logging.INFO for r in retries)
    first = retries[0].getMessage()
    assert "fake sentence_nli call" in first and "attempt 1 of 4" in first
    assert "RateLimitError" in first and "Retry-After 2 s" in first
    assert f"next attempt in {clock.waits[0]:.2f} s" in first
    _no_texts(logs)


def test_a_reask_and_an_unverified_answer_are_logged(logs: pytest.LogCaptureFixture) -> None:
    _checker, result = _check(["not json"])
    assert result.verdict == "supported"  # type: ignore[attr-defined]  # the re-ask answered
    reasks = _from(logs, "conli.agents.structured")
    assert [r.levelno for r in reasks] == [logging.INFO]
    assert "re-asking sentence_nli" in reasks[0].getMessage()
    assert "answer 1 of at most 2 did not validate" in reasks[0].getMessage()

    logs.clear()
    _checker, result = _check(["not json", "still not json"])
    assert result.verdict == "unverified"  # type: ignore[attr-defined]
    lines = [r.getMessage() for r in _from(logs, "conli.agents.structured")]
    assert len(lines) == 2 and "no valid answer in 2 attempts" in lines[1]
    assert lines[1].endswith("did not validate: unverified")
    _no_texts(logs)


def test_the_bar_and_the_gate_are_logged_at_debug(logs: pytest.LogCaptureFixture) -> None:
    from conli.gate import fails

    _checker, result = _check([])
    bars = [r.getMessage() for r in _from(logs, "conli.gate")]
    assert bars == ["bar: verdict supported, 1 scores (lowest none, 1 without one), threshold "
                    "none: passed"]
    assert not fails(result, "unverified")  # type: ignore[arg-type]
    assert _from(logs, "conli.gate")[-1].getMessage() == \
        "gate --fail-on unverified: outcome passed: holds"
    assert all(r.levelno == logging.DEBUG for r in _from(logs, "conli.gate"))

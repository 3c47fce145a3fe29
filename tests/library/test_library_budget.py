"""The library under a latency budget (issue 45): closing, cancelling and sharing checkers.

Every test runs on ``ScriptedBackend`` (``tests.support.scripted``), never a model.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import conli
from conli import Checker, Settings, acheck, backends
from conli.backends.fake import ScriptedBackend
from conli.hook import close_shared_checkers
from tests.support import scripted
from tests.support.paths import ROOT

SOURCE = "The library opened in 1962. It lends books free of charge."
RESPONSE = "The library opened in 1962. It charges FALSE two dollars."
DETECT = {"mitigate": False, "judge": False}


class _Closing(ScriptedBackend):
    """The scripted model, counting how often it is closed."""

    def __init__(self) -> None:
        super().__init__(responder=scripted.responder(), judges_batches=True)
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_a_checker_is_a_context_manager_that_closes_once() -> None:
    backend = _Closing()
    with Checker(Settings(word_scores="off", **DETECT), backend=backend) as checker:  # type: ignore[arg-type]
        assert checker.check(SOURCE, "It opened in 1962.").verdict == "supported"
        assert backend.closed == 0
    assert backend.closed == 1
    checker.close()  # a second close does nothing
    assert backend.closed == 1


def test_a_checker_closes_when_the_block_raises() -> None:
    backend = _Closing()
    with pytest.raises(KeyError), Checker(Settings(word_scores="off", **DETECT), backend=backend):  # type: ignore[arg-type]
        raise KeyError("the caller's error goes on")
    assert backend.closed == 1


def test_cancelling_acheck_starts_no_further_model_call() -> None:
    full = ScriptedBackend(responder=scripted.responder(), judges_batches=True)
    with Checker(Settings(word_scores="off"), backend=full) as checker:
        checker.check(SOURCE, RESPONSE)
    assert len(full.calls) >= 3  # detection, rewrite, judge: what a whole check makes

    slow = ScriptedBackend(responder=scripted.responder(sleep=0.4), judges_batches=True)
    checker = Checker(Settings(word_scores="off"), backend=slow)

    async def give_up() -> int:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(acheck(SOURCE, RESPONSE, checker=checker), 0.1)
        return len(slow.calls)  # the calls in flight when it was cancelled

    in_flight = asyncio.run(give_up())
    checker.close()  # waits for the abandoned check's thread to end
    assert in_flight <= 1 and len(slow.calls) == in_flight


def test_concurrent_achecks_without_a_checker_share_one(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[ScriptedBackend] = []

    def load(_arg: str, _settings: object) -> ScriptedBackend:
        time.sleep(0.2)  # a model load: long enough for the four calls to overlap
        built.append(ScriptedBackend(responder=scripted.responder(), judges_batches=True,
                                     max_concurrency=4))
        return built[-1]

    monkeypatch.setitem(backends._REGISTRY, "shared", load)
    settings = Settings(llm="shared", word_scores="off", **DETECT)  # type: ignore[arg-type]

    async def four(given: Settings) -> list[str]:
        done = await asyncio.gather(*(acheck(SOURCE, RESPONSE, given) for _ in range(4)))
        return [result.verdict for result in done]

    try:
        assert asyncio.run(four(settings)) == ["hallucinated"] * 4
        assert len(built) == 1  # one model load, not four
        assert asyncio.run(four(settings)) == ["hallucinated"] * 4  # a later loop: the same one
        other = Settings(llm="shared", word_scores="off", judge=False, mitigate=True)
        asyncio.run(four(other))
        assert len(built) == 2  # other settings, another checker
    finally:
        close_shared_checkers()


@pytest.mark.integration
def test_shared_checkers_are_closed_at_interpreter_exit(tmp_path: Path) -> None:
    log = tmp_path / "closed.log"
    script = (
        "import asyncio, sys\n"
        "from conli import Settings, acheck, backends\n"
        "from conli.backends.fake import ScriptedBackend\n"
        "from tests.support import scripted\n"
        "class Logged(ScriptedBackend):\n"
        "    def close(self):\n"
        "        open(sys.argv[1], 'a').write('closed\\n')\n"
        "backends.register_backend('logged', lambda _a, _s: Logged(\n"
        "    responder=scripted.responder(), judges_batches=True))\n"
        "settings = Settings(llm='logged', judge=False, mitigate=False, word_scores='off')\n"
        f"print(asyncio.run(acheck({SOURCE!r}, {RESPONSE!r}, settings)).verdict)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    done = subprocess.run([sys.executable, "-c", script, str(log)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**env, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hallucinated\n"
    assert log.read_text() == "closed\n"


@pytest.mark.parametrize("pairs", [("src", "resp"), ["src", "resp"], "src",
                                   {"source": "src", "response": "resp"}])
def test_one_pair_given_for_the_list_is_a_type_error(monkeypatch: pytest.MonkeyPatch,
                                                     pairs: object) -> None:
    loaded: list[str] = []
    monkeypatch.setitem(backends._REGISTRY, "never", lambda arg, _s: loaded.append(arg))
    with pytest.raises(TypeError, match=r"not a list of pairs: pass \[pair\]"):
        conli.score(pairs, Settings(llm="never"))  # type: ignore[arg-type]
    assert loaded == []  # refused before any model was loaded
    with Checker(Settings(word_scores="off", **DETECT),  # type: ignore[arg-type]
                 backend=scripted.backend()) as checker, pytest.raises(TypeError, match="one "):
        checker.check_many(pairs)  # type: ignore[arg-type]


def test_a_list_of_one_pair_is_checked() -> None:
    with Checker(Settings(word_scores="off", **DETECT),  # type: ignore[arg-type]
                 backend=scripted.backend()) as checker:
        (only,) = checker.check_many([("The library opened in 1962.", "It opened in 1962.")])
    assert only.verdict == "supported" and only.error is None

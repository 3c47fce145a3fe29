"""Many pairs in one call: ``conli.score`` and ``Checker.check_many``, and ``acheck``'s bound."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import conli
from conli import Checker, CheckResult, Settings
from conli.backends import register_backend
from conli.backends.base import Message
from conli.errors import BadRequestError, ConfigError
from tests.support import scripted
from tests.support.many import DETECT, SOURCE, Peak, _backend, _settings


def _ordered_responder() -> Callable[[list[Message]], str]:
    """The first pair's check waits until the last pair's has been asked: out of order."""
    last_asked = threading.Event()
    answer = scripted.responder()

    def respond(messages: list[Message]) -> str:
        text = messages[-1]["content"]
        if "LAST" in text:
            last_asked.set()
        if "FIRST" in text:
            assert last_asked.wait(30)
        if "BOOM" in text:
            raise BadRequestError("400 the provider refused this one")
        return answer(messages)

    return respond


def test_check_many_keeps_input_order_and_puts_each_error_in_its_place() -> None:
    checker = Checker(_settings(), backend=_backend(_ordered_responder()))
    pairs: list[object] = [
        (SOURCE, "It opened in 1962 FIRST."),
        {"source": SOURCE, "response": "It charges FALSE two dollars."},
        (SOURCE, "   "),                                       # empty: refused
        {"source": SOURCE, "response": "It lends BOOM books."},  # the backend refuses it
        "not a pair",
        (SOURCE, "It lends books free of charge LAST."),
    ]
    results = checker.check_many(pairs, max_concurrency=3)  # type: ignore[arg-type]
    assert [r.index for r in results] == list(range(6))
    assert [r.verdict for r in results] == ["supported", "hallucinated", None, None, None,
                                            "supported"]
    assert [r.passed for r in results] == [True, False, False, False, False, True]
    assert [r.error.kind if r.error else None for r in results] == [
        None, None, "unusable-input", "backend", "unusable-input", None]
    assert results[2].error is not None and "empty" in results[2].error.message
    assert results[0].result is not None and results[0].result.verdict == "supported"


@pytest.mark.parametrize("limit", [2, 3])
def test_check_many_runs_max_concurrency_checks_at_once(limit: int) -> None:
    peak = Peak(limit)
    checker = Checker(_settings(), backend=_backend(peak))
    # distinct texts with no number or name the source lacks (the unstated rule would flag)
    pairs = [(SOURCE, "It opened in 1962, said a reader" + " again" * n + ".")
             for n in range(4 * limit)]
    results = checker.check_many(pairs, max_concurrency=limit)
    assert all(r.verdict == "supported" for r in results), [r.error for r in results]
    assert peak.peak == limit


def test_the_default_bound_is_the_max_concurrency_setting() -> None:
    peak = Peak(2)
    checker = Checker(_settings(max_concurrency=2), backend=_backend(peak))
    checker.check_many([(SOURCE, f"It opened in 1962, said reader {n}.") for n in range(6)])
    assert peak.peak == 2


def test_a_threshold_for_the_call_and_a_bad_one_refused_before_any_check() -> None:
    backend = _backend(scripted.responder())
    checker = Checker(_settings(), backend=backend)
    [result] = checker.check_many([(SOURCE, "It opened in 1962.")])
    assert result.result is not None and result.result.threshold is None
    # the scripted model reports no log-probabilities: a bar on its 1-or-0 scores is refused
    with pytest.raises(ConfigError, match="reports no log-probabilities"):
        checker.check_many([(SOURCE, "It opened in 1962.")], threshold=0.5)
    with pytest.raises(ConfigError, match="threshold"):
        checker.check_many([(SOURCE, "It opened in 1962.")], threshold=1.5)
    with pytest.raises(ConfigError, match="max_concurrency"):
        checker.check_many([(SOURCE, "It opened in 1962.")], max_concurrency=0)
    assert len(backend.calls) == 1


def test_the_progress_bar_shows_only_where_asked_or_on_a_terminal(
        capsys: pytest.CaptureFixture[str]) -> None:
    checker = Checker(_settings(), backend=_backend(scripted.responder()))
    checker.check_many([(SOURCE, "It opened in 1962.")] * 2)  # stderr is not a terminal
    assert capsys.readouterr().err == ""
    checker.check_many([(SOURCE, "It opened in 1962.")] * 2, progress=True)
    assert "2/2" in capsys.readouterr().err


def test_conli_score_detects_only_and_gives_score_verdict_passed() -> None:
    backend = _backend(scripted.responder())
    register_backend("fake-many", lambda _arg, _settings: backend)
    results = conli.score([(SOURCE, "It opened in 1962."), (SOURCE, "It charges FALSE fees.")],
                          Settings(llm="fake-many", detectors=["cot"]), progress=False)
    # no log-probabilities: each score is its verdict as 1 or 0, and says so
    assert [(r.score, r.verdict, r.passed) for r in results] == [
        (1.0, "supported", True), (0.0, "hallucinated", False)]
    assert all(r.result is not None and r.result.score_method == "verdict" for r in results)
    flagged = results[1].result
    assert flagged is not None and flagged.mitigation.status == "disabled"
    assert flagged.judge_raw is None and flagged.judge_refined is None


def test_acheck_runs_max_concurrency_checks_at_once() -> None:
    peak = Peak(3)
    checker = Checker(_settings(max_concurrency=3), backend=_backend(peak))
    threads: set[str] = set()
    run = checker.run_graph

    def recorded(*args: Any, **kwargs: Any) -> CheckResult:
        threads.add(threading.current_thread().name)
        return run(*args, **kwargs)

    checker.run_graph = recorded  # type: ignore[method-assign]

    async def many() -> list[str]:
        done = await asyncio.gather(*(
            conli.acheck(SOURCE, "It opened in 1962, said a reader" + " again" * n + ".",
                         checker=checker)
            for n in range(12)))
        return [r.verdict for r in done]

    assert asyncio.run(many()) == ["supported"] * 12
    assert peak.peak == 3
    # on the checker's own pool (the loop's default pool would allow more, on other threads)
    assert len(threads) == 3 and all(t.startswith("conli-check") for t in threads)
    checker.close()


def test_check_and_acheck_take_the_question(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = _backend(scripted.responder())
    register_backend("fake-question", lambda _arg, _settings: backend)
    settings = Settings(llm="fake-question", **DETECT)  # type: ignore[arg-type]
    conli.check(SOURCE, "It opened in 1962.", settings, question="When did WHICH-LIBRARY open?")
    asyncio.run(conli.acheck(SOURCE, "It opened in 1962.", settings,
                             question="When did THAT-LIBRARY open?"))
    asked = " ".join(m["content"] for call in backend.calls for m in call)
    assert "WHICH-LIBRARY" in asked and "THAT-LIBRARY" in asked

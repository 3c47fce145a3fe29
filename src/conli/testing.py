"""A pytest helper: assert that an answer is grounded in its source.

``assert_grounded(source, response)`` runs a detect-only check (no rewrite, no judge) and
raises ``AssertionError`` when the result does not pass (``conli.gate``: a hallucinated or
unverified result never does; under a threshold every checked sentence needs a score at or
above it). The message lists every sentence that kept it from passing, with its reasons,
and the bar it was held to, so a failing test says what to fix without a debugger::

    from conli.testing import assert_grounded

    def test_the_bot_answers_from_the_docs(checker):
        assert_grounded(DOCS, bot.answer("When did it open?"), threshold=0.7, checker=checker)

Pass a long-lived ``checker`` (e.g. a session fixture) to load the model once per session.
"""

from __future__ import annotations

from conli.config import Settings
from conli.gate import ranking_score
from conli.models import CheckResult, SentenceResult
from conli.pipeline import Checker
from conli.run.inputs import Source
from conli.run.plan import plan_for

__all__ = ["assert_grounded"]


def assert_grounded(
    source: Source,
    response: str,
    threshold: float | None = None,
    *,
    checker: Checker | None = None,
    settings: Settings | None = None,
) -> CheckResult:
    """Check ``response`` against ``source``, detect only; return the result if it passes.

    ``threshold`` (None: the settings' ``threshold``, else the verdict alone) is the bar on
    every checked sentence's score. ``checker`` is reused (``settings`` then override it
    for this call, as in ``Checker.check``); without one a checker is built and closed.
    Raises ``AssertionError`` naming each sentence that failed, and why.
    """
    base = settings or (checker.plan.settings if checker is not None else None)
    more = {} if threshold is None else {"threshold": threshold}
    plan = plan_for(base, "check", more=more)
    if checker is not None:
        result = checker.check(source, response, plan=plan)
    else:
        with Checker(plan) as own:
            result = own.check(source, response)
    if not result.passed:
        raise AssertionError(failure_message(result))
    return result


def failure_message(result: CheckResult) -> str:
    """Why ``result`` did not pass: the bar, then each sentence that kept it from passing."""
    bar = ("no threshold: the verdict must be supported" if result.threshold is None
           else f"threshold {result.threshold:g} on every checked sentence's score")
    score = "none" if result.support_score is None else \
        f"{result.support_score:.2f} by {result.score_method}"
    lines = [f"the response is not grounded in its source: verdict {result.verdict}, "
             f"support score {score} ({bar})"]
    for sentence in result.sentences:
        why = _why(sentence, result.threshold)
        if why is None:
            continue
        lines.append(f"  sentence {sentence.index} {why}: {sentence.text!r}")
        lines += [f"    - {reason}" for reason in sentence.reasons]
    return "\n".join(lines)


def _why(sentence: SentenceResult, threshold: float | None) -> str | None:
    """What keeps ``sentence`` from passing (None: nothing)."""
    if not sentence.checked:
        return None
    score = ranking_score(sentence.score, sentence.score_method)
    shown = "" if score is None else f" (score {score:.2f})"
    if sentence.verdict in ("hallucinated", "unverified"):
        return f"{sentence.verdict}{shown}"
    if threshold is None:
        return None
    if score is None:
        return f"has no score to hold to threshold {threshold:g}"
    if score < threshold:
        return f"scored {score:.2f}, below threshold {threshold:g}"
    return None

"""The user's bar on a result (``passed``) and what a CI gate (``--fail-on``) makes of it.

``passed`` is decided once, here, for every front door (``clears``). Only a ``supported``
result can pass: a ``hallucinated`` one never does, at any threshold, and an ``unverified``
one never does either. A threshold (``Settings.threshold``) can only make the bar higher:
every checked sentence then needs a score at or above it, so a sentence without a score
that ranks (none, or its verdict standing in as 1 or 0: ``score_method`` verdict) cannot
pass: never fail open. The threshold
decides ``passed`` only; the verdicts stay the detectors' (and a calibration's, which
decides them where one is given).

A gate (``--fail-on``) reads ``passed``: ``hallucinated`` fails a result that was checked
and did not pass; ``unverified`` also fails one that could not be checked. ``GateTally``
counts a batch's results against the same gate. Both decisions are logged at DEBUG on
``conli.gate``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from conli.models import CheckResult, SentenceResult, Verdict

log = logging.getLogger(__name__)
Outcome = Literal["passed", "failed", "unverified"]
FailOn = Literal["hallucinated", "unverified"]
FAIL_ON: tuple[FailOn, ...] = ("hallucinated", "unverified")
# What each --fail-on tests, in the words the help and the CLI's stderr line use.
FAIL_ON_TESTS: dict[FailOn, str] = {
    "hallucinated": "a checked result did not pass (it is hallucinated, or a sentence "
                    "scored below --threshold)",
    "unverified": "a result did not pass or could not be checked (hallucinated, below "
                  "--threshold, or unverified)",
}


def response_verdict(verdicts: Iterable[Verdict | None]) -> Verdict:
    """Hallucinated if any sentence is; unverified if none is but any could not be checked."""
    seen = {v for v in verdicts if v is not None}
    if "hallucinated" in seen:
        return "hallucinated"
    if "unverified" in seen or not seen:
        return "unverified"
    return "supported"


def supported_share(sentences: Iterable[SentenceResult]) -> float | None:
    """Supported checked sentences over checked sentences; None when none was checked.

    Faithfulness as peers report it (supported claims over claims). An unverified sentence
    counts as checked and not supported: never fail open.
    """
    verdicts = [s.verdict for s in sentences if s.checked]
    if not verdicts:
        return None
    return verdicts.count("supported") / len(verdicts)


def clears(verdict: str | None, scores: Iterable[float | None], threshold: float | None) -> bool:
    """The bar itself: ``verdict`` supported and, under ``threshold``, every score at or above it.

    ``scores`` are the checked sentences' scores. Hallucinated and unverified never clear
    it, whatever the scores: a threshold cannot pass what the detectors flagged.
    """
    given = list(scores)
    if verdict != "supported":
        cleared = False
    elif threshold is None:
        cleared = True
    else:
        cleared = bool(given) and all(s is not None and s >= threshold for s in given)
    if log.isEnabledFor(logging.DEBUG):
        ranked = [s for s in given if s is not None]
        log.debug("bar: verdict %s, %d scores (lowest %s, %d without one), threshold %s: %s",
                  verdict, len(given), f"{min(ranked):g}" if ranked else "none",
                  len(given) - len(ranked), "none" if threshold is None else f"{threshold:g}",
                  "passed" if cleared else "not passed")
    return cleared


def ranking_score(score: float | None, method: str | None) -> float | None:
    """``score`` where it ranks; None for none, or a verdict standing in as 1 or 0."""
    return None if method == "verdict" else score


def passes(result: CheckResult, threshold: float | None) -> bool:
    """Whether ``result`` clears the bar (``clears``) under ``threshold``."""
    return clears(result.verdict, [ranking_score(s.score, s.score_method)
                                   for s in result.sentences if s.checked], threshold)


def outcome(result: CheckResult) -> Outcome:
    """``unverified`` if the check could not complete, else whether it ``passed``.

    Without a threshold, ``failed`` is exactly the verdict ``hallucinated``.
    """
    if result.verdict == "unverified":
        return "unverified"
    return "passed" if result.passed else "failed"


def fails(result: CheckResult, fail_on: FailOn) -> bool:
    """``--fail-on hallucinated``: a failed result; ``unverified``: anything but passed."""
    return _gate_fails(outcome(result), fail_on)


def _gate_fails(seen: Outcome, fail_on: FailOn) -> bool:
    failed = seen != "passed" if fail_on == "unverified" else seen == "failed"
    log.debug("gate --fail-on %s: outcome %s: %s", fail_on, seen,
              "fails" if failed else "holds")
    return failed


def gate_line(result: CheckResult, fail_on: FailOn) -> str:
    """The one stderr line of a result that failed ``--fail-on``: the test, then why."""
    why = f"verdict {result.verdict}"
    if result.threshold is not None:
        why += f", {against_threshold(result, result.threshold)}"
    return f"--fail-on {fail_on} failed: {FAIL_ON_TESTS[fail_on]}; here: {why}"


def against_threshold(result: CheckResult, threshold: float) -> str:
    """How the support score stood against ``threshold``, in words that cannot contradict.

    A score the verdict stands in for (1 or 0) does not rank, so no threshold passes it,
    even where the figure is above it; a score at or above it fails only by the verdict.
    """
    score, bar = result.support_score, f"threshold {threshold:g}"
    if score is None:
        return f"no support score to hold to {bar}: not passed"
    if result.passed:
        return f"support score {score:g} by {result.score_method} meets {bar}"
    if ranking_score(score, result.score_method) is None:
        return (f"support score {score:g} is the verdict standing in (score_method verdict), "
                f"not a score that ranks, so {bar} cannot be passed")
    if score < threshold:
        return f"support score {score:g} by {result.score_method}, {bar} not passed"
    return (f"support score {score:g} by {result.score_method} meets {bar}, but a "
            f"{result.verdict} result never passes")


def record_outcome(result: Mapping[str, Any], threshold: float | None) -> Outcome | None:
    """A stored result's outcome (``--json`` / batch OUT form) under ``threshold``.

    Decided again from its verdict and sentence scores, so records an earlier run wrote
    are held to this run's bar; None for a result without a verdict (judge mode).
    """
    verdict = result.get("verdict")
    if verdict is None:
        return None
    if verdict == "unverified":
        return "unverified"
    scores = [ranking_score(s.get("score"), s.get("score_method"))
              for s in result.get("sentences") or [] if s.get("checked")]
    return "passed" if clears(verdict, scores, threshold) else "failed"


def unranked(result: Mapping[str, Any], threshold: float | None) -> bool:
    """A supported stored result that fails ``threshold`` only for want of a ranking score.

    A backend that answers without log-probabilities (a gateway that drops them) leaves
    each sentence's verdict standing in as its score (``score_method`` verdict): under a
    threshold such a result cannot pass, whatever it says.
    """
    return threshold is not None and result.get("verdict") == "supported" and any(
        s.get("checked") and ranking_score(s.get("score"), s.get("score_method")) is None
        for s in result.get("sentences") or [])


NO_LOGPROBS = ("the backend answered without log-probabilities, so a sentence's only score "
               "is its verdict (score_method verdict), which no threshold can rank")


def why_not_passed(result: Mapping[str, Any], threshold: float | None) -> str:
    """Why a stored result did not pass ``threshold``'s bar, in one line (its first cause)."""
    sentences = [s for s in result.get("sentences") or [] if s.get("checked")]
    verdict = result.get("verdict")
    if verdict in ("hallucinated", "unverified"):
        first = next((s for s in sentences if s.get("verdict") == verdict), None)
        if first is None:
            return f"verdict {verdict}"
        reasons = first.get("reasons") or []
        why = f": {reasons[0]}" if reasons else ""
        return f"verdict {verdict}: sentence {first.get('index')} {first.get('text')!r}{why}"
    if unranked(result, threshold):
        return f"verdict supported, but {NO_LOGPROBS}; threshold {threshold:g} not passed"
    low = [s for s in sentences if (s.get("score") or 0.0) < (threshold or 0.0)]
    if low:
        worst = min(low, key=lambda s: s.get("score") or 0.0)
        return (f"verdict supported, but sentence {worst.get('index')} scored "
                f"{worst.get('score'):g} below threshold {threshold:g}")
    return f"verdict {verdict}"


@dataclass
class GateTally:
    """A batch's results counted against the bar: passed, failed, unverified, by id."""

    threshold: float | None = None
    counts: Counter[Outcome] = field(default_factory=Counter)
    keys: list[tuple[Outcome, str]] = field(default_factory=list)  # in counting order
    unranked: int = 0  # supported results failed for want of a score that ranks

    def add(self, result: Mapping[str, Any], key: str = "") -> None:
        """Count one stored result under its record's ``key`` (none without a verdict)."""
        seen = record_outcome(result, self.threshold)
        if seen is not None:
            self.counts[seen] += 1
            self.keys.append((seen, key))
            self.unranked += seen == "failed" and unranked(result, self.threshold)

    def fails(self, fail_on: FailOn) -> bool:
        """Whether any counted result fails ``--fail-on``."""
        return any(_gate_fails(seen, fail_on) for seen, n in self.counts.items() if n)

    def failing(self, fail_on: FailOn) -> list[str]:
        """The keys of the results that fail ``--fail-on``, in the order they were counted."""
        return [key for seen, key in self.keys if _gate_fails(seen, fail_on)]

    def format(self) -> str:
        """One summary line: the counts, and the threshold they were held to."""
        bar = "verdict supported" if self.threshold is None else f"threshold {self.threshold:g}"
        failed = f"failed {self.counts['failed']}"
        if self.unranked:
            failed += f" ({self.unranked} supported, without a score that ranks)"
        return (f"passed {self.counts['passed']} · {failed} · "
                f"unverified {self.counts['unverified']} ({bar})")

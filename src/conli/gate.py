"""The user's bar on a result (``passed``) and what a CI gate (``--fail-on``) makes of it.

``passed`` is decided once, here, for every front door. Without a threshold it is the
verdict (``supported``); with one (``Settings.threshold``) every checked sentence needs a
score at or above it, so a sentence without a score (a backend that reports no
log-probabilities) cannot pass: never fail open. An ``unverified`` result never passes.
The threshold decides ``passed`` only; the verdicts stay the detectors' (and a
calibration's, which decides them where one is given).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from conli.models import CheckResult, Verdict

Outcome = Literal["passed", "failed", "unverified"]
FailOn = Literal["hallucinated", "unverified"]
FAIL_ON: tuple[FailOn, ...] = ("hallucinated", "unverified")


def response_verdict(verdicts: Iterable[Verdict | None]) -> Verdict:
    """Hallucinated if any sentence is; unverified if none is but any could not be checked."""
    seen = {v for v in verdicts if v is not None}
    if "hallucinated" in seen:
        return "hallucinated"
    if "unverified" in seen or not seen:
        return "unverified"
    return "supported"


def passes(result: CheckResult, threshold: float | None) -> bool:
    """Whether ``result`` clears the bar: the verdict, or ``threshold`` on every score."""
    if result.verdict == "unverified":
        return False
    if threshold is None:
        return result.verdict == "supported"
    checked = [s for s in result.sentences if s.checked]
    return bool(checked) and all(s.score is not None and s.score >= threshold for s in checked)


def outcome(result: CheckResult) -> Outcome:
    """``unverified`` if the check could not complete, else whether it ``passed``.

    Without a threshold, ``failed`` is exactly the verdict ``hallucinated``.
    """
    if result.verdict == "unverified":
        return "unverified"
    return "passed" if result.passed else "failed"


def fails(result: CheckResult, fail_on: FailOn) -> bool:
    """``--fail-on hallucinated``: a failed result; ``unverified``: anything but passed."""
    seen = outcome(result)
    return seen != "passed" if fail_on == "unverified" else seen == "failed"

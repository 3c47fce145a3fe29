"""A detector that scores each claim from a marker in its text, for threshold tests.

``score30`` in a claim gives it score 0.30 (hallucinated below 0.5, supported at or
above); a claim without a marker is supported with no score, as a label-only detector's;
one with ``UNSURE`` could not be checked (unverified).
"""

import re

from conli import detectors
from conli.detectors.base import Detection, DetectionContext
from conli.models import Judgement

MARK = re.compile(r"\bscore(\d\d)\b")


class ScoreDetector:
    """Scores claims from their ``scoreNN`` marker; no model call."""

    name = "scored"
    supersedes: frozenset[str] = frozenset()

    def detect(self, context: DetectionContext) -> Detection:
        """One judgement per claim."""
        judged: dict[int, list[Judgement]] = {}
        for claim in context.claims:
            found = MARK.search(claim.text)
            score = int(found.group(1)) / 100 if found else None
            verdict = "hallucinated" if score is not None and score < 0.5 else "supported"
            if "UNSURE" in claim.text:
                verdict, score = "unverified", None
            judged[claim.index] = [Judgement(detector=self.name, hypothesis=claim.text,
                                             verdict=verdict, score=score)]
        return Detection(judgements=judged)


detectors.register("scored", ScoreDetector)

"""A detector written the way a user would add one: one module and one registration line."""

from conli import detectors
from conli.detectors.base import Detection, DetectionContext
from conli.models import Judgement


class WordDetector:
    """Flags every claim that contains a given word; passes the rest."""

    name = "word"
    supersedes: frozenset[str] = frozenset()

    def __init__(self, word: str = "FALSE") -> None:
        self.word = word

    def detect(self, context: DetectionContext) -> Detection:
        """One judgement per claim, no model call."""
        return Detection(judgements={
            claim.index: [Judgement(
                detector=self.name, hypothesis=claim.text,
                verdict="hallucinated" if self.word in claim.text else "supported",
                reasoning=f"contains {self.word!r}" if self.word in claim.text else "",
            )]
            for claim in context.claims
        })


detectors.register("word", WordDetector)

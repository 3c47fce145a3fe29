"""``quick``: the one-token check weighed with the model's reading, no generation.

``yesno`` asks the model one token a sentence over the cached source; alone its cut does
not transfer between the dev sets (it flags every HaluEval QA answer). The share of a
sentence's tokens the source makes *less* likely (``pmi_low``, from the reading ``fused``
also makes) corrects it: a small logistic regression over both, fitted on the 509 dev
examples ``fused.v1`` never saw (``signals/quick.v1.json``; its figures, fitted and scored
leave-one-dataset-out, in docs/benchmarks.md). No token is decoded beyond the answer
word, so a check costs prefill: the source twice (the question's and the reading's
prompt), each sentence once more, and the response alone once.

It runs after ``yesno`` and supersedes it. A sentence the one-token check could not score
stays unverified: the reading never passes it alone.
"""

from __future__ import annotations

from conli.detectors.base import Detection, DetectionContext
from conli.detectors.signals import read_signals, signal_notes, signal_parts
from conli.detectors.yesno import YesNo
from conli.models import Judgement
from conli.signals.features import SentenceSignals
from conli.signals.model import QUICK_ARTIFACT, SignalModel, load_model

SUPPORT_FEATURE = "yes_p"  # the one-token check's P(supported), as the classifier reads it


class QuickDetector:
    """Sentence verdicts from the one-token check and the reading, weighed together."""

    name = "quick"
    supersedes: frozenset[str] = frozenset({YesNo.name})

    def detect(self, context: DetectionContext) -> Detection:
        """Read the response once, then weigh each claim's P(supported) with its signals."""
        model = load_model(QUICK_ARTIFACT)
        claims = context.unsettled
        if not claims:
            return Detection()
        signals, reading = read_signals(context, claims)
        out = {claim.index: [self._judge(claim.text, context.judged(claim.index, YesNo.name),
                                         signals.get(claim.index), model, reading.template)]
               for claim in claims}
        return Detection(judgements=out, calls=reading.calls, notes=signal_notes(context))

    def _judge(self, text: str, asked: list[Judgement], signals: SentenceSignals | None,
               model: SignalModel, read_in: str) -> Judgement:
        scored = [j for j in asked if j.score is not None]
        if not scored:
            error = asked[0].error if asked and asked[0].error else \
                "the one-token check gave this sentence no P(supported)"
            return self._unverified(text, error)
        if signals is None:
            return self._unverified(text, "the reading gave this sentence no tokens")
        lead = scored[0]
        values = {**signals.values, SUPPORT_FEATURE: float(lead.score or 0.0)}
        try:
            p = model.probability(values)
        except (KeyError, ValueError) as exc:
            return self._unverified(text, f"a signal could not be computed: {exc}")
        flagged = p >= model.threshold
        said = "; ".join([*signal_parts(signals), f"P(unsupported) {p:.2f} with the reading; "
                          f"{lead.reasoning}"])
        return Judgement(
            detector=self.name, hypothesis=text,
            verdict="hallucinated" if flagged else "supported",
            label=None if flagged else "entailment",
            evidence=lead.evidence if not flagged else "",
            evidence_in_source=lead.evidence_in_source if not flagged else None,
            reasoning=said, score=1.0 - p,
            template=f"{lead.template}+{read_in}+{model.version}",
            chunk_scores=lead.chunk_scores, features=values,
        )

    def _unverified(self, text: str, error: str) -> Judgement:
        return Judgement(detector=self.name, hypothesis=text, verdict="unverified", error=error)

"""The signal detector: a trained classifier over forward-pass and word signals, no generation.

Seed 002's SynCheck fuses cheap per-sentence signals of likelihood, uncertainty and
context influence with a small trained aggregator; seed 001 adds word overlap. This
detector reads the response once with the source and once without (``signals.reader``),
computes each sentence's features (``signals.features``) and scores them with the shipped
classifier (``signals.model``). Its reason is built from the signals: what the source never
states, and the source sentence closest to the claim.

In the hybrid preset it runs first: a sentence it scores below the model's band is settled
(``final``); the rest go to chain-of-thought NLI, which supersedes it there. On text that is
not English the names signal (``novel_entities``, the English spaCy NER) is left at none,
and a note says so.
"""

from __future__ import annotations

from conli.agents.nli_prompts import opening_as_nli
from conli.detectors.base import Detection, DetectionContext, skipped_for_sentence
from conli.models import Judgement, Note
from conli.signals.features import SentenceSignals, sentence_signals
from conli.signals.lexical import SourceWords, entity_texts, unread
from conli.signals.model import ARTIFACT, SignalModel, load_model
from conli.signals.reader import CACHED_TEMPLATE, Reading, read
from conli.text.segment import Segment

_QUOTE_CHARS = 160


class SignalDetector:
    """Sentence verdicts from the signal classifier (``--detector signals``)."""

    name = "signals"
    supersedes: frozenset[str] = frozenset()

    def detect(self, context: DetectionContext) -> Detection:
        """Read the response, score each claim, and say which signals decided."""
        model = load_model(context.deps.settings.signal_model or ARTIFACT)
        claims = context.unsettled
        if not claims:
            return Detection()
        signals, reading = read_signals(context, claims)
        return Detection(judgements={
            claim.index: [self._judge(claim.text, signals.get(claim.index), model,
                                      reading.template)]
            for claim in claims
        }, calls=reading.calls, notes=signal_notes(context))

    def _judge(self, text: str, signals: SentenceSignals | None, model: SignalModel,
               read_in: str) -> Judgement:
        if signals is None:
            return self._unverified(text, "the reading gave this sentence no tokens")
        try:
            p = model.probability(signals.values)
        except (KeyError, ValueError) as exc:
            return self._unverified(text, f"a signal could not be computed: {exc}")
        flagged = p >= model.threshold
        return Judgement(
            detector=self.name,
            hypothesis=text,
            verdict="hallucinated" if flagged else "supported",
            evidence=signals.overlap.closest[:_QUOTE_CHARS],
            evidence_in_source=True if signals.overlap.closest else None,
            reasoning=reason(signals, p),
            score=1.0 - p,
            template=f"{read_in}+{model.version}",
            final=p < model.band[0],
            features=signals.values,
        )

    def _unverified(self, text: str, error: str) -> Judgement:
        return Judgement(detector=self.name, hypothesis=text, verdict="unverified", error=error)


def read_signals(context: DetectionContext, claims: list[Segment]
                 ) -> tuple[dict[int, SentenceSignals], Reading]:
    """One reading of the response (with and without the source): each claim's features.

    Also the reading, for the prompt it was read in (``signals_read.v1``, or through the
    prompt cache ``signals_read.v2+nli_base.vN``, as ``settings.reading`` says) and the
    calls it made. A ``ConfigError`` if the backend cannot read; a claim the reading gave
    no tokens is missing from the result (its check is unverified).
    """
    deps = context.deps
    opening = None
    if deps.settings.reading == "cache":
        opening = opening_as_nli(CACHED_TEMPLATE, deps.settings, deps.backend.capabilities)
    reading = read(deps.backend, context.source, context.response, context.segments,
                   question=context.question, opening=opening,
                   spotlight=deps.settings.spotlight)
    names = entity_texts(deps.nlp, claims, context.language, deps.settings.language)
    return sentence_signals(reading.arrays, claims,
                            SourceWords.of(context.source, context.language), names), reading


def signal_notes(context: DetectionContext) -> list[Note]:
    """A note for each claim whose names the signal could not read (not English)."""
    skipped = unread(context.claims, context.language, context.deps.settings.language)
    return [skipped_for_sentence("novel_entities", index, language)
            for index, language in skipped.items()]


def reason(signals: SentenceSignals, p: float) -> str:
    """A short account of the signals: what the source lacks, how well it covers the claim."""
    return f"P(unsupported) = {p:.2f} from the signals; " + "; ".join(signal_parts(signals))


def signal_parts(signals: SentenceSignals) -> list[str]:
    """What the signals say of a claim, most concrete first: unstated numbers and names."""
    words = signals.overlap
    parts = []
    if words.novel_numbers:
        parts.append(f"numbers the source never states: {', '.join(words.novel_numbers)}")
    if words.novel_entities:
        parts.append(f"names the source never states: {', '.join(words.novel_entities)}")
    if words.novel_words and not parts:
        parts.append(f"words the source never uses: {', '.join(words.novel_words[:6])}")
    parts.append(f"the closest source sentence holds {words.best_sentence:.0%} of its words")
    unexplained = signals.values["pmi_low"]
    parts.append(f"the source made {unexplained:.0%} of its tokens less likely")
    return parts

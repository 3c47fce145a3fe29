"""The fused detector: chain-of-thought NLI's verdict weighed with the model's own reading.

Chain-of-thought NLI on the embedded model ranks sentences poorly (its label probability
is near 1 for most of them), while the share of a sentence's tokens that the source makes
*less* likely (``pmi_low``, seed 002's context influence) ranks well but has no reason to
give. A small logistic regression over both, per sentence, trained on the dev sets
(``benchmarks/experiments/issue-28-detector-training/train_detector.py``), decides; its
artifact is ``signals/fused.v1.json``.

It runs after ``sentence_nli`` and ``entity_nli`` and supersedes them: its judgement keeps
their reasoning and quoted evidence, so a rewrite still has a model-written reason. A
sentence NLI could not check stays unverified: the signals never pass it on their own.
"""

from __future__ import annotations

import math
import re

from conli.agents.nli import nli_windows
from conli.agents.nli_prompts import nli_prompt
from conli.agents.scoring import score_hypothesis
from conli.agents.structured import CallRecord
from conli.detectors.base import Detection, DetectionContext, default_reason
from conli.detectors.nli import EntityNLI, SentenceNLI
from conli.detectors.signals import read_signals, reason, signal_notes
from conli.models import Judgement
from conli.signals.features import SentenceSignals
from conli.signals.model import FUSED_ARTIFACT, SignalModel, load_model
from conli.signals.reader import READ_TEMPLATE
from conli.text.segment import Segment

NLI_DETECTORS = (SentenceNLI.name, EntityNLI.name)
NLI_UNSCORED = 0.5  # the support score a sentence gets when NLI read no label probability
_WORD = re.compile(r"\w+")


def nli_features(judgements: list[Judgement]) -> dict[str, float]:
    """What the classifier reads of NLI's judgements of one sentence (as in training)."""
    scores = [j.score for j in judgements if j.score is not None]
    return {
        "nli_support": min(scores) if scores else NLI_UNSCORED,
        "nli_flagged": float(any(j.verdict != "supported" for j in judgements)),
        # a contradiction states what the source says otherwise; neutral only misses support
        "nli_contradiction": float(any(j.verdict == "hallucinated"
                                       and j.label == "contradiction" for j in judgements)),
    }


def context_features(context: DetectionContext) -> dict[str, float]:
    """What the classifier may read of the response as a whole: its kind and length.

    A one-word answer to a question and a five-sentence summary give the reading very
    different amounts of text to count; these let a model weigh its signals accordingly.
    """
    return {
        "has_question": float(bool(context.question)),
        "log_response_words": math.log1p(len(_WORD.findall(context.response))),
        "log_claims": math.log(max(1, len(context.claims))),
    }


def label_priors(context: DetectionContext, claims: list[Segment]
                 ) -> tuple[dict[int, float], list[CallRecord]]:
    """P(entailment) of each claim from the NLI prompt's label token, with no reasoning.

    A second look at the claim, in another framing: the chain-of-thought label is near
    certain either way, this one is not. It shares the NLI calls' cached prefix, so each
    costs the claim's own tokens and one decoded token. Over a long source's windows a
    claim keeps its best window's (as NLI does); unreadable: ``NLI_UNSCORED``.
    """
    deps = context.deps
    prompt = nli_prompt(deps.settings.nli_prompt)
    template = prompt.template("sentence")
    windows = nli_windows(deps.backend, context.source, deps.settings)
    priors: dict[int, float] = {}
    calls: list[CallRecord] = []
    for claim in claims:
        found = []
        for window in windows:
            score, made = score_hypothesis(deps.backend, window, claim.text, template,
                                           prompt.label_opening, deps.settings,
                                           question=context.question)
            calls += made
            found += [score] if score is not None else []
        priors[claim.index] = max(found, default=NLI_UNSCORED)
    return priors, calls


def fused_model(context: DetectionContext) -> SignalModel:
    """The weights a calibration refitted, else the configured or shipped artifact."""
    applied = context.deps.calibration
    if applied is not None and applied.calibration.fused_model is not None:
        return SignalModel.from_json(applied.calibration.fused_model)
    return load_model(context.deps.settings.fused_model or FUSED_ARTIFACT)


FLAG_LABELS = ("contradiction", "neutral")  # NLI's own flags; anything else the signals made


class FusedDetector:
    """Sentence verdicts from NLI's judgement and the reading, weighed together."""

    name = "fused"
    supersedes: frozenset[str] = frozenset(NLI_DETECTORS)

    def detect(self, context: DetectionContext) -> Detection:
        """Read the response once, then weigh each claim's NLI judgements with its signals."""
        model = fused_model(context)
        claims = context.unsettled
        if not claims:
            return Detection()
        # the label looks share the NLI calls' cached prefix: before the reading replaces it
        priors, calls = label_priors(context, claims) if "nli_prior" in model.features \
            else ({}, [])
        signals, reading = read_signals(context, claims)
        whole = context_features(context)
        out: dict[int, list[Judgement]] = {}
        for claim in claims:
            nli = [j for name in NLI_DETECTORS for j in context.judged(claim.index, name)]
            read = signals.get(claim.index)
            extra = {**whole, **({"nli_prior": priors[claim.index]} if priors else {})}
            out[claim.index] = [self._judge(claim.text, nli, read, model, extra,
                                            read_in=reading.template)]
        return Detection(judgements=out, calls=calls + reading.calls,
                         notes=signal_notes(context))

    def _judge(self, text: str, nli: list[Judgement], signals: SentenceSignals | None,
               model: SignalModel, extra: dict[str, float] | None = None, *,
               read_in: str = READ_TEMPLATE) -> Judgement:
        if not nli:
            return self._unverified(text, "chain-of-thought NLI did not judge this sentence")
        failed = [j for j in nli if j.verdict == "unverified"]
        if failed:  # never passed on the signals alone
            return self._unverified(text, failed[0].error or "NLI could not check it")
        if signals is None:
            return self._unverified(text, "the reading gave this sentence no tokens")
        values = {**signals.values, **nli_features(nli), **(extra or {})}
        try:
            p = model.probability(values)
            kept = model.keeps_nli_flag(values)
        except (KeyError, ValueError) as exc:
            return self._unverified(text, f"a signal could not be computed: {exc}")
        flagged = p >= model.threshold
        lead = next((j for j in nli if j.verdict == "hallucinated"), nli[0])
        said = "; ".join(j.reasoning for j in nli if j.verdict == "hallucinated" and j.reasoning)
        numbers = ", ".join(signals.overlap.novel_numbers)
        if kept and said and numbers:
            said += f" (numbers the source never states: {numbers})"
        if flagged and not said:
            said = "chain-of-thought NLI found it supported, but " + reason(signals, p)
        elif not flagged and said:
            said = f"overruled (P(unsupported) = {p:.2f} with the signals): {said}"
        return Judgement(
            detector=self.name, hypothesis=text,
            verdict="hallucinated" if flagged else "supported",
            label=lead.label, evidence=lead.evidence, evidence_in_source=lead.evidence_in_source,
            reasoning=said or lead.reasoning, score=1.0 - p,
            entity=lead.entity if flagged else None,
            template=f"{lead.template}+{read_in}+{model.version}",
            features=values,
        )

    def reason(self, judgement: Judgement) -> str:
        """NLI's wording, but a flag NLI passed is the signals', not a claimed entailment."""
        if judgement.verdict == "hallucinated" and judgement.label not in FLAG_LABELS:
            judgement = judgement.model_copy(update={"label": "flagged by the signals"})
        return default_reason(judgement)

    def _unverified(self, text: str, error: str) -> Judgement:
        return Judgement(detector=self.name, hypothesis=text, verdict="unverified", error=error)

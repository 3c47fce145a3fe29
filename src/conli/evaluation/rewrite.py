"""Rewrite metrics (CoNLI section 4.2): overlap scores, zero-flag share, judge before/after.

ROUGE is Google's ``rouge-score`` (``RougeScorer``) with its default tokenizer and no
stemming (``use_stemmer=False``): lowercase, every run of characters other than ``a-z0-9``
is a separator; ROUGE-L is the summary-free LCS variant (``rougeL``), all as F-measures in
[0, 1]. BLEU is sacrebleu's corpus BLEU-4 (Papineni et al.): clipped n-gram counts summed
over the corpus, geometric mean of the four precisions, brevity penalty from total lengths,
on a 0-100 scale, with its ``13a`` tokenizer, case kept and no smoothing (an n-gram order
without a match makes BLEU 0). Both libraries are the ``[eval]`` extra and are imported
on first use, since the CLI imports this module at start.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from statistics import mean
from typing import Any

from conli.errors import ConfigError, InputError, install_hint
from conli.evaluation.detection import CheckerLike, Outcome
from conli.evaluation.loaders import Example

_ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


def _rouge_score() -> Any:
    """The ``rouge_score`` package, imported on first use (the ``[eval]`` extra)."""
    try:
        import rouge_score.rouge_scorer
        import rouge_score.tokenizers
    except ImportError as exc:  # pragma: no cover - the [eval] extra is missing
        raise ConfigError(f"ROUGE needs rouge-score: {install_hint('eval')}") from exc
    return rouge_score


@cache
def _rouge_scorer(rouge_types: tuple[str, ...]) -> Any:
    """A ``RougeScorer`` for these types without stemming, built once per tuple of types."""
    return _rouge_score().rouge_scorer.RougeScorer(list(rouge_types), use_stemmer=False)


def _rouge(candidate: str, reference: str, rouge_types: tuple[str, ...]) -> dict[str, float]:
    """F-measure per ROUGE type; ``RougeScorer.score`` takes the reference (target) first."""
    scores = _rouge_scorer(rouge_types).score(reference, candidate)
    return {name: float(scores[name].fmeasure) for name in rouge_types}


def rouge_tokens(text: str) -> list[str]:
    """Tokens as ``rouge-score``'s default tokenizer makes them (no stemming)."""
    tokenizer = _rouge_score().tokenizers.DefaultTokenizer(use_stemmer=False)
    return list(tokenizer.tokenize(text))


def rouge_n(candidate: str, reference: str, n: int) -> float:
    """ROUGE-N F-measure (``rouge-score`` knows n from 1 to 9)."""
    return _rouge(candidate, reference, (f"rouge{n}",))[f"rouge{n}"]


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences (``rouge-score``'s)."""
    return len(_rouge_score().rouge_scorer.lcs_ind(list(a), list(b)))


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F-measure from the LCS of the two token sequences."""
    return _rouge(candidate, reference, ("rougeL",))["rougeL"]


def corpus_bleu(candidates: Sequence[str], references: Sequence[str], max_n: int = 4) -> float:
    """Corpus BLEU on a 0-100 scale from sacrebleu; 0 when any n-gram order has no match."""
    if len(candidates) != len(references):
        raise ValueError("one reference per candidate is needed")
    if not candidates:
        return 0.0  # sacrebleu fails on an empty corpus
    try:
        from sacrebleu.metrics.bleu import BLEU
    except ImportError as exc:  # pragma: no cover - the [eval] extra is missing
        raise ConfigError(f"BLEU needs sacrebleu: {install_hint('eval')}") from exc
    bleu = BLEU(tokenize="13a", smooth_method="none", max_ngram_order=max_n)
    return float(bleu.corpus_score(list(candidates), [list(references)]).score)


def overlap_scores(candidates: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean ROUGE-1/2/L F-measures and corpus BLEU of candidates against references."""
    if not candidates:
        return {}
    pairs = [_rouge(c, r, _ROUGE_TYPES) for c, r in zip(candidates, references, strict=True)]
    return {
        **{name: mean(p[name] for p in pairs) for name in _ROUGE_TYPES},
        "bleu": corpus_bleu(candidates, references),
        "n": float(len(pairs)),
    }


@dataclass(frozen=True)
class Redetection:
    """The re-detection verdict of one refined text; ``empty`` if everything was removed."""

    example_id: str
    verdict: str


def redetect(checker: CheckerLike, outcomes: Sequence[Outcome], examples: Sequence[Example],
             progress: Callable[[int, int], None] | None = None) -> list[Redetection]:
    """Check each changed refined text again (detection only); unchanged ones keep their verdict."""
    by_id = {e.id: e for e in examples}
    found = []
    for number, outcome in enumerate(outcomes, start=1):
        result = outcome.result
        if result is None:
            found.append(Redetection(outcome.example_id, "unverified"))
            continue
        if result.refined_text == by_id[outcome.example_id].response:
            found.append(Redetection(outcome.example_id, result.verdict))
            continue
        if not result.refined_text.strip():
            found.append(Redetection(outcome.example_id, "empty"))
            continue
        try:
            again = checker.check(by_id[outcome.example_id].source, result.refined_text)
            found.append(Redetection(outcome.example_id, again.verdict))
        except InputError:
            found.append(Redetection(outcome.example_id, "unverified"))
        if progress is not None:
            progress(number, len(outcomes))
    return found


def _share(values: Sequence[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def _judge_summary(scores: Sequence[float | None]) -> dict[str, Any]:
    scored = [s for s in scores if s is not None]
    return {"mean": mean(scored) if scored else None, "scored": len(scored),
            "unscored": len(scores) - len(scored)}


def rewrite_rows(
    outcomes: Sequence[Outcome], examples: Sequence[Example], redetections: Sequence[Redetection]
) -> list[dict[str, Any]]:
    """One row per example (``rewrites.jsonl``), so two runs can be paired example by example.

    ``clean``: the refined text re-detects as supported (or was emptied); ``rouge_l_vs_raw``:
    how much of the raw text the rewrite kept (1.0 when unchanged).
    """
    by_id = {e.id: e for e in examples}
    again = {r.example_id: r.verdict for r in redetections}
    rows = []
    for outcome in outcomes:
        example, result = by_id[outcome.example_id], outcome.result
        refined = result.refined_text if result else example.response
        rows.append({
            "dataset": example.dataset, "example_id": example.id, "label": example.label,
            "predicted": outcome.predicted, "changed": refined != example.response,
            "mitigation": result.mitigation.status if result else "error",
            "redetected": again.get(outcome.example_id),
            "clean": again.get(outcome.example_id) in ("supported", "empty"),
            "judge_raw": result.judge_raw.score if result and result.judge_raw else None,
            "judge_refined": result.judge_refined.score
            if result and result.judge_refined else None,
            "rouge_l_vs_raw": rouge_l(refined, example.response) if refined.strip() else 0.0,
            "refined": refined,
        })
    return rows


def rewrite_report(
    outcomes: Sequence[Outcome], examples: Sequence[Example], redetections: Sequence[Redetection]
) -> dict[str, Any]:
    """Before/after numbers for one dataset of full-pipeline outcomes."""
    by_id = {e.id: e for e in examples}
    again = {r.example_id: r.verdict for r in redetections}
    raw = [by_id[o.example_id].response for o in outcomes]
    refined = [o.result.refined_text if o.result else by_id[o.example_id].response
               for o in outcomes]
    changed = [i for i, (a, b) in enumerate(zip(raw, refined, strict=True)) if a != b]
    with_ref = [i for i, o in enumerate(outcomes) if by_id[o.example_id].reference is not None]
    references = [by_id[outcomes[i].example_id].reference or "" for i in with_ref]
    statuses = Counter(o.result.mitigation.status if o.result else "error" for o in outcomes)
    return {
        "n": len(outcomes),
        "changed": len(changed),
        "mitigation_status": dict(statuses),
        "refined_vs_raw": overlap_scores([refined[i] for i in changed], [raw[i] for i in changed]),
        "vs_reference": {
            "raw": overlap_scores([raw[i] for i in with_ref], references),
            "refined": overlap_scores([refined[i] for i in with_ref], references),
        },
        "zero_flags": {
            "raw": _share([o.predicted == "supported" for o in outcomes]),
            "refined": _share([again.get(o.example_id) in ("supported", "empty")
                               for o in outcomes]),
            "refined_unverified": sum(1 for o in outcomes
                                      if again.get(o.example_id) == "unverified"),
            "refined_empty": sum(1 for o in outcomes if again.get(o.example_id) == "empty"),
            "rewritten_clean": _share([again.get(outcomes[i].example_id) in ("supported", "empty")
                                       for i in changed]),
        },
        "judge": {
            "raw": _judge_summary([o.result.judge_raw.score if o.result and o.result.judge_raw
                                   else None for o in outcomes]),
            "refined": _judge_summary([o.result.judge_refined.score
                                       if o.result and o.result.judge_refined else None
                                       for o in outcomes]),
        },
    }

"""Rewrite metrics (CoNLI section 4.2): overlap scores, zero-flag share, judge before/after.

ROUGE follows the ``rouge-score`` package's defaults without stemming: lowercase, every
run of characters other than ``a-z0-9`` is a separator; ROUGE-L is the summary-free LCS
variant (``rougeL``), all as F-measures in [0, 1]. BLEU is corpus BLEU-4 (Papineni et
al.): clipped n-gram counts summed over the corpus, geometric mean of the four precisions,
brevity penalty from total lengths, on a 0-100 scale; tokens are words and single
punctuation marks, case kept, close to but not byte-identical with sacrebleu's ``13a``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

from conli.errors import InputError
from conli.evaluation.detection import CheckerLike, Outcome
from conli.evaluation.loaders import Example

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_BLEU_TOKEN = re.compile(r"\w+|[^\w\s]")


def rouge_tokens(text: str) -> list[str]:
    """Tokens as ``rouge-score`` makes them (no stemming)."""
    return [t for t in _NON_ALNUM.sub(" ", text.lower()).split() if t]


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _prf(overlap: int, candidate_total: int, reference_total: int) -> float:
    precision = overlap / candidate_total if candidate_total else 0.0
    recall = overlap / reference_total if reference_total else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def rouge_n(candidate: str, reference: str, n: int) -> float:
    """ROUGE-N F-measure."""
    cand, ref = _ngrams(rouge_tokens(candidate), n), _ngrams(rouge_tokens(reference), n)
    overlap = sum((cand & ref).values())
    return _prf(overlap, sum(cand.values()), sum(ref.values()))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)) time, O(len(b)) memory)."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F-measure from the LCS of the two token sequences."""
    cand, ref = rouge_tokens(candidate), rouge_tokens(reference)
    return _prf(lcs_length(cand, ref), len(cand), len(ref))


def corpus_bleu(candidates: Sequence[str], references: Sequence[str], max_n: int = 4) -> float:
    """Corpus BLEU on a 0-100 scale; 0 when any n-gram order has no match."""
    if len(candidates) != len(references):
        raise ValueError("one reference per candidate is needed")
    matches = [0] * max_n
    totals = [0] * max_n
    cand_length = ref_length = 0
    for candidate, reference in zip(candidates, references, strict=True):
        cand, ref = _BLEU_TOKEN.findall(candidate), _BLEU_TOKEN.findall(reference)
        cand_length += len(cand)
        ref_length += len(ref)
        for n in range(1, max_n + 1):
            c, r = _ngrams(cand, n), _ngrams(ref, n)
            matches[n - 1] += sum((c & r).values())
            totals[n - 1] += sum(c.values())
    if not cand_length or min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals, strict=True)) / max_n
    brevity = 1.0 if cand_length > ref_length else math.exp(1 - ref_length / cand_length)
    return 100 * brevity * math.exp(log_precision)


def overlap_scores(candidates: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean ROUGE-1/2/L F-measures and corpus BLEU of candidates against references."""
    if not candidates:
        return {}
    pairs = list(zip(candidates, references, strict=True))
    return {
        "rouge1": mean(rouge_n(c, r, 1) for c, r in pairs),
        "rouge2": mean(rouge_n(c, r, 2) for c, r in pairs),
        "rougeL": mean(rouge_l(c, r) for c, r in pairs),
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


def _judge_summary(scores: Sequence[int | None]) -> dict[str, Any]:
    scored = [s for s in scores if s is not None]
    return {"mean": mean(scored) if scored else None, "scored": len(scored),
            "unscored": len(scores) - len(scored)}


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

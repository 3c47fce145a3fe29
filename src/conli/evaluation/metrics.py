"""Detection metrics as pure functions; the positive class is *hallucinated*.

Predictions are ``hallucinated``, ``supported`` or ``unverified``. An ``unverified``
prediction is never dropped and never counted as correct: in the binary metrics it is
scored as the wrong class for its gold label (a miss on a hallucination, a false alarm on
a grounded response), and it is counted separately in the confusion matrix.

Conventions follow scikit-learn: an F1 whose denominator is 0 is 0.0; balanced accuracy
averages the recall of the classes present in the gold labels; AUROC is undefined (None)
with only one class present.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from conli.models import Verdict


@dataclass(frozen=True)
class Confusion:
    """Gold (hallucinated / not) against predicted (hallucinated / supported / unverified)."""

    tp: int = 0  # gold hallucinated, predicted hallucinated
    fn: int = 0  # gold hallucinated, predicted supported
    fp: int = 0  # gold grounded, predicted hallucinated
    tn: int = 0  # gold grounded, predicted supported
    unverified_pos: int = 0  # gold hallucinated, predicted unverified
    unverified_neg: int = 0  # gold grounded, predicted unverified

    @property
    def n(self) -> int:
        """All examples, unverified included."""
        return self.tp + self.fn + self.fp + self.tn + self.unverified_pos + self.unverified_neg

    @property
    def unverified(self) -> int:
        """Examples whose prediction is unverified."""
        return self.unverified_pos + self.unverified_neg

    def as_wrong(self) -> tuple[int, int, int, int]:
        """(tp, fp, fn, tn) with each unverified scored as the wrong class."""
        return self.tp, self.fp + self.unverified_neg, self.fn + self.unverified_pos, self.tn

    def verified_only(self) -> tuple[int, int, int, int]:
        """(tp, fp, fn, tn) over the verified predictions alone (an optimistic bound)."""
        return self.tp, self.fp, self.fn, self.tn


def confusion(gold: Sequence[bool], predicted: Sequence[Verdict]) -> Confusion:
    """Count gold labels (True = hallucinated) against verdicts."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    counts = {"tp": 0, "fn": 0, "fp": 0, "tn": 0, "unverified_pos": 0, "unverified_neg": 0}
    for g, p in zip(gold, predicted, strict=True):
        if p == "unverified":
            counts["unverified_pos" if g else "unverified_neg"] += 1
        elif p == "hallucinated":
            counts["tp" if g else "fp"] += 1
        elif p == "supported":
            counts["fn" if g else "tn"] += 1
        else:
            raise ValueError(f"unknown verdict {p!r}")
    return Confusion(**counts)


def f1(tp: int, fp: int, fn: int) -> float:
    """F1 = 2tp / (2tp + fp + fn); 0.0 when nothing was gold or predicted positive."""
    denominator = 2 * tp + fp + fn
    return 2 * tp / denominator if denominator else 0.0


def f1_scores(tp: int, fp: int, fn: int, tn: int) -> tuple[float, float, float]:
    """(F1-macro, F1 of the hallucination class, F1 of the non-hallucination class)."""
    f1_h = f1(tp, fp, fn)
    f1_s = f1(tn, fn, fp)  # the negative class: its "tp" is tn, its fp is our fn
    return (f1_h + f1_s) / 2, f1_h, f1_s


def balanced_accuracy(tp: int, fp: int, fn: int, tn: int) -> float:
    """Mean recall over the classes present in the gold labels."""
    recalls = []
    if tp + fn:
        recalls.append(tp / (tp + fn))
    if tn + fp:
        recalls.append(tn / (tn + fp))
    return sum(recalls) / len(recalls) if recalls else 0.0


def accuracy(tp: int, fp: int, fn: int, tn: int) -> float:
    """Share of correct predictions."""
    total = tp + fp + fn + tn
    return (tp + tn) / total if total else 0.0


def auroc(gold: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve for "higher score = more likely hallucinated".

    The Mann-Whitney form with average ranks for ties (equal to scikit-learn's
    ``roc_auc_score``); None when only one class is present.
    """
    if len(gold) != len(scores):
        raise ValueError(f"{len(gold)} gold labels but {len(scores)} scores")
    positives = sum(1 for g in gold if g)
    negatives = len(gold) - positives
    if not positives or not negatives:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        average_rank = (i + j) / 2 + 1  # ranks are 1-based
        for k in range(i, j + 1):
            ranks[order[k]] = average_rank
        i = j + 1
    rank_sum = sum(r for r, g in zip(ranks, gold, strict=True) if g)
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def binary_metrics(counts: tuple[int, int, int, int]) -> dict[str, float]:
    """F1-macro, F1 per class, balanced accuracy and accuracy from (tp, fp, fn, tn)."""
    macro, f1_h, f1_s = f1_scores(*counts)
    return {
        "f1_macro": macro,
        "f1_hallucinated": f1_h,
        "f1_supported": f1_s,
        "balanced_accuracy": balanced_accuracy(*counts),
        "accuracy": accuracy(*counts),
    }


def detection_report(
    gold: Sequence[bool],
    predicted: Sequence[Verdict],
    scores: Mapping[str, Sequence[float | None]] | None = None,
) -> dict[str, Any]:
    """Everything for one set: metrics (unverified as wrong), verified-only, counts, AUROCs.

    ``scores`` maps a score name to one value per example (higher = more hallucinated);
    an example without a value (None) is left out of that AUROC, and how many were used
    is reported beside it.
    """
    matrix = confusion(gold, predicted)
    report: dict[str, Any] = {
        "n": matrix.n,
        "positives": sum(1 for g in gold if g),
        **binary_metrics(matrix.as_wrong()),
        "unverified": matrix.unverified,
        "unverified_rate": matrix.unverified / matrix.n if matrix.n else 0.0,
        "verified_only": binary_metrics(matrix.verified_only()),
        "confusion": asdict(matrix),
        "auroc": {},
    }
    for name, values in (scores or {}).items():
        kept = [(g, v) for g, v in zip(gold, values, strict=True) if v is not None]
        area = auroc([g for g, _ in kept], [v for _, v in kept]) if kept else None
        report["auroc"][name] = {"value": area, "n": len(kept)}
    return report


AVERAGED = ("f1_macro", "f1_hallucinated", "f1_supported", "balanced_accuracy", "accuracy",
            "unverified_rate")


def average_reports(reports: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Unweighted mean of each headline metric across datasets (the papers' AVG column)."""
    reports = list(reports)
    if not reports:
        return {}
    return {key: sum(float(r[key]) for r in reports) / len(reports) for key in AVERAGED}

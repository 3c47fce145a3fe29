"""Detection metrics; the positive class is *hallucinated*. The arithmetic is scikit-learn's.

Predictions are ``hallucinated``, ``supported`` or ``unverified``. An ``unverified``
prediction is never dropped and never counted as correct: in the binary metrics it is
scored as the wrong class for its gold label (a miss on a hallucination, a false alarm on
a grounded response), and it is counted separately in the confusion matrix.

F1, balanced accuracy and accuracy are scikit-learn's ``f1_score``,
``balanced_accuracy_score`` and ``accuracy_score`` on the binary labels that a set of
(tp, fp, fn, tn) counts stands for, i.e. after that mapping; AUROC is ``roc_auc_score``.
Where scikit-learn has no answer or only a warning, this module keeps its conventions
explicitly: an F1 whose denominator is 0 is 0.0 (``zero_division=0.0``); balanced accuracy
averages the recall of the classes present in the gold labels (scikit-learn's rule, its
warning silenced); no examples at all give 0.0 rather than an error; AUROC is undefined
(None, not NaN) with only one class present. scikit-learn is imported on first use: it
is the ``[eval]`` extra and slow to import, and the CLI imports this module at start.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from conli.errors import ConfigError, install_hint
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


def flag(predicted: str, gold: bool, *, errored: bool = False) -> float:
    """A response's prediction as a flag for balanced accuracy (1.0: hallucinated).

    The one reading of a stored prediction: ``unverified``, or an example whose check
    errored, is the wrong class for its gold label, as ``Confusion.as_wrong`` scores it;
    nothing is dropped.
    """
    if errored or predicted == "unverified":
        return 0.0 if gold else 1.0
    return 1.0 if predicted == "hallucinated" else 0.0


# What the [eval] extra brings, by import name: checked before an evaluation's first model call.
EVAL_MODULES = ("sklearn", "scipy", "rouge_score", "sacrebleu", "matplotlib")


def require_eval_extra() -> None:
    """Refuse at once when the ``[eval]`` extra is missing, not after the run at the scores."""
    missing = [name for name in EVAL_MODULES if not _importable(name)]
    if missing:
        raise ConfigError(f"conli eval and conli calibrate need the [eval] extra "
                          f"({', '.join(missing)} missing): {install_hint('eval')}")


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        return False


def _sklearn_metrics() -> Any:
    """``sklearn.metrics``, imported on first use (the ``[eval]`` extra, slow to import)."""
    try:
        from sklearn import metrics
    except ImportError as exc:  # pragma: no cover - the [eval] extra is missing
        raise ConfigError(f"the evaluation metrics need scikit-learn: {install_hint('eval')}"
                          ) from exc
    return metrics


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence scikit-learn's warnings for the edge cases whose answers are set here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="sklearn")
        yield


def binary_labels(tp: int, fp: int, fn: int, tn: int) -> tuple[list[bool], list[bool]]:
    """(gold, predicted) binary labels, True = hallucinated, that the counts stand for."""
    gold = [True] * tp + [False] * fp + [True] * fn + [False] * tn
    predicted = [True] * tp + [True] * fp + [False] * fn + [False] * tn
    return gold, predicted


def f1(tp: int, fp: int, fn: int) -> float:
    """F1 = 2tp / (2tp + fp + fn); 0.0 when nothing was gold or predicted positive."""
    if not tp + fp + fn:
        return 0.0  # no example is positive either way; scikit-learn wants at least one
    gold, predicted = binary_labels(tp, fp, fn, 0)
    with _quiet():
        return float(_sklearn_metrics().f1_score(gold, predicted, pos_label=True,
                                                 zero_division=0.0))


def f1_scores(tp: int, fp: int, fn: int, tn: int) -> tuple[float, float, float]:
    """(F1-macro, F1 of the hallucination class, F1 of the non-hallucination class)."""
    if not tp + fp + fn + tn:
        return 0.0, 0.0, 0.0
    gold, predicted = binary_labels(tp, fp, fn, tn)
    with _quiet():
        per_class = _sklearn_metrics().f1_score(gold, predicted, labels=[True, False],
                                                average=None, zero_division=0.0)
    f1_h, f1_s = float(per_class[0]), float(per_class[1])
    return (f1_h + f1_s) / 2, f1_h, f1_s  # macro: both classes, even one absent from gold


def balanced_accuracy(tp: int, fp: int, fn: int, tn: int) -> float:
    """Mean recall over the classes present in the gold labels; 0.0 with no examples."""
    if not tp + fp + fn + tn:
        return 0.0
    gold, predicted = binary_labels(tp, fp, fn, tn)
    with _quiet():  # "y_pred contains classes not in y_true": that class is left out
        return float(_sklearn_metrics().balanced_accuracy_score(gold, predicted))


def accuracy(tp: int, fp: int, fn: int, tn: int) -> float:
    """Share of correct predictions; 0.0 with no examples."""
    if not tp + fp + fn + tn:
        return 0.0
    gold, predicted = binary_labels(tp, fp, fn, tn)
    return float(_sklearn_metrics().accuracy_score(gold, predicted))


def auroc(gold: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve for "higher score = more likely hallucinated".

    scikit-learn's ``roc_auc_score`` (ties count one half); None, not NaN, when only one
    class is present.
    """
    if len(gold) != len(scores):
        raise ValueError(f"{len(gold)} gold labels but {len(scores)} scores")
    if all(gold) or not any(gold):
        return None
    return float(_sklearn_metrics().roc_auc_score([bool(g) for g in gold], list(scores)))


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

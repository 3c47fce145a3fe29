"""Metrics against hand-computed values and the closed forms the conventions name."""

from __future__ import annotations

import warnings
from itertools import product

import pytest

from conli.evaluation.metrics import (
    accuracy,
    auroc,
    average_reports,
    balanced_accuracy,
    binary_labels,
    binary_metrics,
    confusion,
    detection_report,
    f1,
    f1_scores,
)

GOLD = [True, True, True, False, False, False, False, True]
PRED = ["hallucinated", "supported", "unverified", "hallucinated", "supported", "supported",
        "unverified", "hallucinated"]


def test_confusion_counts_unverified_separately_and_as_wrong() -> None:
    m = confusion(GOLD, PRED)  # type: ignore[arg-type]
    assert (m.tp, m.fn, m.fp, m.tn, m.unverified_pos, m.unverified_neg) == (2, 1, 1, 2, 1, 1)
    assert m.n == 8 and m.unverified == 2
    assert m.as_wrong() == (2, 2, 2, 2)  # unverified hallucination -> fn, unverified grounded -> fp
    assert m.verified_only() == (2, 1, 1, 2)


def test_f1_macro_and_per_class_by_hand() -> None:
    # tp=3 fp=1 fn=2 tn=4: F1-H = 6/9, F1-S = 8/11, macro = their mean
    macro, f1_h, f1_s = f1_scores(3, 1, 2, 4)
    assert f1_h == pytest.approx(6 / 9)
    assert f1_s == pytest.approx(8 / 11)
    assert macro == pytest.approx((6 / 9 + 8 / 11) / 2)  # 0.69697
    assert balanced_accuracy(3, 1, 2, 4) == pytest.approx((3 / 5 + 4 / 5) / 2)  # 0.7
    assert binary_metrics((3, 1, 2, 4))["accuracy"] == pytest.approx(0.7)


def test_zero_division_and_single_class_conventions() -> None:
    assert f1(0, 0, 0) == 0.0
    assert balanced_accuracy(0, 1, 0, 3) == pytest.approx(0.75)  # only grounded gold: recall 3/4
    assert auroc([True, True], [0.1, 0.2]) is None


def test_auroc_with_ties_by_hand() -> None:
    # pos 0.9 beats both negatives, pos 0.4 beats 0.1 and ties 0.4: (1 + 1 + 1 + 0.5) / 4
    assert auroc([True, False, True, False], [0.9, 0.1, 0.4, 0.4]) == pytest.approx(0.875)
    assert auroc([True, False], [0.0, 1.0]) == 0.0
    assert auroc([False, True, False, True], [1, 2, 3, 4]) == pytest.approx(0.75)


def test_detection_report_scores_unverified_as_wrong() -> None:
    r = detection_report(GOLD, PRED, {"s": [0.9, 0.2, None, 0.8, 0.1, 0.0, None, 0.7]})  # type: ignore[arg-type]
    assert r["f1_macro"] == pytest.approx(0.5)  # from (2, 2, 2, 2)
    assert r["balanced_accuracy"] == pytest.approx(0.5)
    assert r["verified_only"]["f1_hallucinated"] == pytest.approx(4 / 6)
    assert r["unverified"] == 2 and r["unverified_rate"] == pytest.approx(0.25)
    # AUROC over the 6 scored: pos {0.9, 0.2, 0.7} vs neg {0.8, 0.1, 0.0}: 7 of 9 pairs
    assert r["auroc"]["s"] == {"value": pytest.approx(7 / 9), "n": 6}


def test_average_is_unweighted_over_datasets() -> None:
    a = detection_report([True, False], ["hallucinated", "supported"])
    b = detection_report([True, False], ["supported", "hallucinated"])
    avg = average_reports([a, b])
    assert avg["f1_macro"] == pytest.approx(0.5)
    assert avg["balanced_accuracy"] == pytest.approx(0.5)


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError):
        confusion([True], [])


def closed_forms(tp: int, fp: int, fn: int, tn: int) -> tuple[float, float, float, float]:
    """(F1-H, F1-S, BAcc, accuracy) as the module docstring defines them."""
    f1_h = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else 0.0
    f1_s = 2 * tn / (2 * tn + fn + fp) if 2 * tn + fn + fp else 0.0
    recalls = [r for r in (tp / (tp + fn) if tp + fn else None,
                           tn / (tn + fp) if tn + fp else None) if r is not None]
    bacc = sum(recalls) / len(recalls) if recalls else 0.0
    total = tp + fp + fn + tn
    return f1_h, f1_s, bacc, (tp + tn) / total if total else 0.0


@pytest.mark.parametrize("counts", list(product(range(3), repeat=4)), ids=str)
def test_scikit_learn_keeps_the_conventions_at_every_edge(
    counts: tuple[int, int, int, int],
) -> None:
    # every (tp, fp, fn, tn) in 0..2, the empty set and the one-class sets included
    f1_h, f1_s, bacc, acc = closed_forms(*counts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # decided here, not warned about
        macro, got_h, got_s = f1_scores(*counts)
        assert got_h == pytest.approx(f1_h) and got_s == pytest.approx(f1_s)
        assert macro == pytest.approx((f1_h + f1_s) / 2)
        assert f1(counts[0], counts[1], counts[2]) == pytest.approx(f1_h)
        assert balanced_accuracy(*counts) == pytest.approx(bacc)
        assert accuracy(*counts) == pytest.approx(acc)


def test_binary_labels_stand_for_the_counts() -> None:
    gold, predicted = binary_labels(3, 1, 2, 4)
    verdicts = ["hallucinated" if p else "supported" for p in predicted]
    assert confusion(gold, verdicts).as_wrong() == (3, 1, 2, 4)  # type: ignore[arg-type]


def test_auroc_is_none_not_nan_without_both_classes() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn would warn and return NaN
        assert auroc([False, False], [0.1, 0.2]) is None
        assert auroc([], []) is None
    value = auroc([True, False], [0.9, 0.1])
    assert type(value) is float and value == 1.0  # a plain float, fit for JSON

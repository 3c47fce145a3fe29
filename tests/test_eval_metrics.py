"""Metrics against hand-computed values."""

from __future__ import annotations

import pytest

from conli.evaluation.metrics import (
    auroc,
    average_reports,
    balanced_accuracy,
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

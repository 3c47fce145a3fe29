"""Fit the signal classifiers, choose their threshold and band, and score them leave-one-out.

Sentences with a known label train a logistic regression on standardised features
(label-balanced). A response's score is its most suspicious sentence's; the threshold on
it is the one with the best balanced accuracy averaged over the training sets, so no
single large set picks it (thresholds transfer poorly between sets: this is the rule
that held up leave-one-dataset-out). Sentences of a hallucinated response whose wrong
sentence is unknown do not train the model, only its threshold.

``leave_one_dataset_out`` is the honest estimate: every dev set is scored by a model
trained and thresholded without it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from conli.signals.model import SignalModel
from conli.training.data import ExampleRows

MODEL_VERSION = "signals.v1"
FUSED_VERSION = "fused.v1"
# the fast classifier's features: pmi_low alone held up best leave-one-dataset-out (61.8
# BAcc against 57.8 for all fifteen: more features raise AUROC but not a threshold that
# transfers between sets)
FAST_FEATURES = ("pmi_low",)
# the fused classifier's features: the reading's strongest signal and NLI's judgement
FUSED_FEATURES = ("pmi_low", "nli_support", "nli_flagged")
# an NLI flag the fused classifier never overrules: the sentence states a number the source
# does not (a swapped figure barely moves pmi_low; 67.5 against 67.4 BAcc without the rule)
FUSED_KEEP = ("novel_numbers",)
# the levers of issue 28, each a feature set (and the NLI flags it never overrules) scored
# leave-one-dataset-out beside the shipped one by ``train_detector.py fit``
# (benchmarks/experiments/issue-28-detector-training/)
ALIGN = ("align_min", "align_mean")  # hidden-state alignment of the sentence to the source
CONTEXT = ("has_question", "log_response_words", "log_claims")  # what kind of response
FUSED_CANDIDATES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "shipped": (FUSED_FEATURES, FUSED_KEEP),
    "+align": ((*FUSED_FEATURES, *ALIGN), FUSED_KEEP),
    "+context": ((*FUSED_FEATURES, *CONTEXT), FUSED_KEEP),
    "+label look": ((*FUSED_FEATURES, "nli_prior"), FUSED_KEEP),
    "+all three": ((*FUSED_FEATURES, *ALIGN, *CONTEXT, "nli_prior"), FUSED_KEEP),
    "keep contradictions": (FUSED_FEATURES, (*FUSED_KEEP, "nli_contradiction")),
    "+context, keep contradictions": ((*FUSED_FEATURES, *CONTEXT),
                                      (*FUSED_KEEP, "nli_contradiction")),
}
C = 0.1  # L2 strength: chosen leave-one-dataset-out on the dev readings (0.03-1 within 1.5)
SEED = 0


def fit(rows: Sequence[ExampleRows], features: Sequence[str] = FAST_FEATURES,
        version: str = MODEL_VERSION, keep: Sequence[str] = ()) -> SignalModel:
    """The classifier, threshold and default band fitted on ``rows``."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x = [s.vector(features) for r in rows for s, label in zip(r.sentences, r.labels, strict=True)
         if label is not None]
    y = [label for r in rows for label in r.labels if label is not None]
    scaler = StandardScaler().fit(np.asarray(x))
    fitted = LogisticRegression(
        C=C, class_weight="balanced", max_iter=5000, random_state=SEED
    ).fit(scaler.transform(np.asarray(x)), np.asarray(y))
    model = SignalModel(
        version=version, features=tuple(features),
        mean=tuple(float(v) for v in scaler.mean_),
        scale=tuple(float(v) for v in scaler.scale_),
        coef=tuple(float(v) for v in fitted.coef_[0]), intercept=float(fitted.intercept_[0]),
        threshold=0.5, band=(0.0, 1.0), keep_nli_flag_if=tuple(keep),
    )
    threshold = best_threshold([response_score(model, r) for r in rows], [r.label for r in rows],
                               [r.dataset for r in rows])
    return replace(model, threshold=threshold, band=(threshold, 1.0))


def response_score(model: SignalModel, row: ExampleRows) -> float:
    """P(hallucinated) of the response: that of its most suspicious sentence."""
    return max((model.probability(s.values) for s in row.sentences), default=0.0)


def best_threshold(scores: Sequence[float], gold: Sequence[bool],
                   groups: Sequence[str] | None = None) -> float:
    """The threshold with the best balanced accuracy averaged over ``groups``.

    The lowest such among ties; without ``groups``, over all scores at once.
    """
    from sklearn.metrics import balanced_accuracy_score

    groups = groups or ["all"] * len(scores)
    by_group: dict[str, list[int]] = {}
    for i, group in enumerate(groups):
        by_group.setdefault(group, []).append(i)
    usable = [idx for idx in by_group.values() if len({gold[i] for i in idx}) > 1]
    best, chosen = -1.0, 0.5
    for t in sorted(set(scores)):
        value = statistics.mean(
            balanced_accuracy_score([gold[i] for i in idx], [scores[i] >= t for i in idx])
            for idx in usable) if usable else 0.0
        if value > best:
            best, chosen = value, t
    return chosen


def choose_band(model: SignalModel, rows: Sequence[ExampleRows]) -> tuple[float, float]:
    """The hybrid band whose low end gives the best balanced accuracy on ``rows``.

    Below the low end the signals settle a sentence; above it chain of thought decides.
    """
    from sklearn.metrics import balanced_accuracy_score

    usable = list(rows)
    if not usable:
        return model.band
    sentence_scores = [[model.probability(s.values) for s in r.sentences] for r in usable]
    candidates = sorted({round(p, 3) for ps in sentence_scores for p in ps} | {0.0})
    best, chosen = -1.0, 0.0
    for low in candidates:
        predicted = [hybrid_verdict(ps, [s.cot for s in r.sentences], low, model.threshold)
                     for r, ps in zip(usable, sentence_scores, strict=True)]
        value = balanced_accuracy_score([r.label for r in usable], predicted)
        if value > best + 1e-9:
            best, chosen = value, low
    return (chosen, 1.0)


def hybrid_verdict(
    scores: Sequence[float], cot: Sequence[str | None], low: float, threshold: float
) -> bool:
    """The response's verdict in the hybrid: signals below ``low``, chain of thought above.

    A sentence chain of thought has no verdict for keeps the signals' verdict.
    """
    flagged = False
    for p, second in zip(scores, cot, strict=False):
        if p < low or second is None:
            flagged |= p >= threshold
        else:
            flagged |= second != "supported"
    return flagged


@dataclass(frozen=True)
class HeldOut:
    """One dev set scored by a model that never saw it."""

    dataset: str
    n: int
    auroc: float | None
    balanced_accuracy: float
    hybrid_balanced_accuracy: float | None
    nli_share: float | None  # share of sentences the hybrid sent to chain of thought
    scores: list[float]
    gold: list[bool]
    predicted: list[bool]


def leave_one_dataset_out(
    rows: Sequence[ExampleRows],
    *,
    features: Sequence[str] = FAST_FEATURES,
    version: str = MODEL_VERSION,
    keep: Sequence[str] = (),
    hybrid: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[HeldOut]:
    """Score every dev set with a model fitted, thresholded and banded on the others."""
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    out = []
    for dataset in sorted({r.dataset for r in rows}):
        if progress is not None:
            progress(dataset)
        train = [r for r in rows if r.dataset != dataset]
        test = [r for r in rows if r.dataset == dataset]
        model = fit(train, features, version, keep)
        scores = [response_score(model, r) for r in test]
        gold = [r.label for r in test]
        predicted = [s >= model.threshold for s in scores]
        hybrid_bacc = share = None
        if hybrid:
            low, _ = choose_band(model, train)
            per = [[model.probability(s.values) for s in r.sentences] for r in test]
            verdicts = [hybrid_verdict(ps, [s.cot for s in r.sentences], low, model.threshold)
                        for r, ps in zip(test, per, strict=True)]
            hybrid_bacc = balanced_accuracy_score(gold, verdicts)
            total = sum(len(ps) for ps in per)
            share = sum(p >= low for ps in per for p in ps) / total if total else None
        out.append(HeldOut(
            dataset=dataset, n=len(test),
            auroc=roc_auc_score(gold, scores) if len(set(gold)) > 1 else None,
            balanced_accuracy=balanced_accuracy_score(gold, predicted),
            hybrid_balanced_accuracy=hybrid_bacc, nli_share=share, scores=scores, gold=gold,
            predicted=predicted,
        ))
    return out

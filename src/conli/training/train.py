"""Fit the signal classifier, choose its threshold and band, and score it leave-one-out.

Sentences with a known label train a logistic regression on standardised features
(label-balanced). Hallucinated responses of several sentences say only that one of them
is wrong: after a first fit, the sentence the model finds most suspicious is taken as the
wrong one and the model is fitted again (multiple-instance learning, one round). A
response's score is its most suspicious sentence's; the threshold on it is chosen on the
training responses by balanced accuracy.

``leave_one_dataset_out`` is the honest estimate: every dev set is scored by a model
trained and thresholded without it (and without the synthetic errors made from it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conli.signals.features import FEATURE_NAMES
from conli.signals.model import SignalModel
from conli.training.data import ExampleRows

MODEL_VERSION = "signals.v1"
C = 0.3  # L2 strength: chosen on the first 149 dev examples, leave-one-dataset-out
SEED = 0
# sentence verdicts of another detector, by (dataset, example id): one per checked sentence
SecondOpinion = Mapping[tuple[str, str], Sequence[str | None]]


def fit(rows: Sequence[ExampleRows], features: Sequence[str] = FEATURE_NAMES) -> SignalModel:
    """The classifier, threshold and default band fitted on ``rows``."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    labels = [list(r.labels) for r in rows]
    model: SignalModel | None = None
    for _ in range(2):
        x, y = [], []
        for row, known in zip(rows, labels, strict=True):
            for signals, label in zip(row.sentences, known, strict=True):
                if label is not None:
                    x.append(signals.vector(features))
                    y.append(label)
        scaler = StandardScaler().fit(np.asarray(x))
        fitted = LogisticRegression(
            C=C, class_weight="balanced", max_iter=5000, random_state=SEED
        ).fit(scaler.transform(np.asarray(x)), np.asarray(y))
        model = SignalModel(
            version=MODEL_VERSION, features=tuple(features),
            mean=tuple(float(v) for v in scaler.mean_),
            scale=tuple(float(v) for v in scaler.scale_),
            coef=tuple(float(v) for v in fitted.coef_[0]), intercept=float(fitted.intercept_[0]),
            threshold=0.5, band=(0.0, 1.0),
        )
        labels = _assume_most_suspicious(rows, model)
    assert model is not None
    real = [r for r in rows if not r.synthetic]
    threshold = best_threshold([response_score(model, r) for r in real], [r.label for r in real])
    return _with(model, threshold=threshold, band=(threshold, 1.0))


def _assume_most_suspicious(
    rows: Sequence[ExampleRows], model: SignalModel
) -> list[list[bool | None]]:
    """Label the most suspicious sentence of each wholly unlabelled hallucinated response."""
    out: list[list[bool | None]] = []
    for row in rows:
        if row.label and row.sentences and all(label is None for label in row.labels):
            scores = [model.probability(s.values) for s in row.sentences]
            top = max(range(len(scores)), key=scores.__getitem__)
            out.append([True if i == top else None for i in range(len(scores))])
        else:
            out.append(list(row.labels))
    return out


def response_score(model: SignalModel, row: ExampleRows) -> float:
    """P(hallucinated) of the response: that of its most suspicious sentence."""
    return max((model.probability(s.values) for s in row.sentences), default=0.0)


def best_threshold(scores: Sequence[float], gold: Sequence[bool]) -> float:
    """The threshold with the best balanced accuracy (the lowest such, among ties)."""
    from sklearn.metrics import balanced_accuracy_score

    best, chosen = -1.0, 0.5
    for t in sorted(set(scores)):
        value = balanced_accuracy_score(gold, [s >= t for s in scores])
        if value > best:
            best, chosen = value, t
    return chosen


def choose_band(
    model: SignalModel, rows: Sequence[ExampleRows], cot: SecondOpinion
) -> tuple[float, float]:
    """The hybrid band whose low end gives the best balanced accuracy on ``rows``.

    Below the low end the signals settle a sentence; above it chain of thought decides.
    """
    from sklearn.metrics import balanced_accuracy_score

    usable = [r for r in rows if (r.dataset, r.example_id) in cot and not r.synthetic]
    if not usable:
        return model.band
    sentence_scores = [[model.probability(s.values) for s in r.sentences] for r in usable]
    candidates = sorted({round(p, 3) for ps in sentence_scores for p in ps} | {0.0})
    best, chosen = -1.0, 0.0
    for low in candidates:
        predicted = [hybrid_verdict(ps, cot[(r.dataset, r.example_id)], low, model.threshold)
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


def leave_one_dataset_out(
    rows: Sequence[ExampleRows],
    cot: SecondOpinion | None = None,
    *,
    features: Sequence[str] = FEATURE_NAMES,
    progress: Callable[[str], None] | None = None,
) -> list[HeldOut]:
    """Score every dev set with a model fitted, thresholded and banded on the others."""
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    out = []
    for dataset in sorted({r.dataset for r in rows}):
        if progress is not None:
            progress(dataset)
        train = [r for r in rows if r.dataset != dataset]
        test = [r for r in rows if r.dataset == dataset and not r.synthetic]
        model = fit(train, features)
        scores = [response_score(model, r) for r in test]
        gold = [r.label for r in test]
        predicted = [s >= model.threshold for s in scores]
        hybrid = share = None
        if cot:
            low, _ = choose_band(model, train, cot)
            usable = [r for r in test if (r.dataset, r.example_id) in cot]
            per = [[model.probability(s.values) for s in r.sentences] for r in usable]
            verdicts = [hybrid_verdict(ps, cot[(r.dataset, r.example_id)], low, model.threshold)
                        for r, ps in zip(usable, per, strict=True)]
            hybrid = balanced_accuracy_score([r.label for r in usable], verdicts)
            total = sum(len(ps) for ps in per)
            share = sum(p >= low for ps in per for p in ps) / total if total else None
        out.append(HeldOut(
            dataset=dataset, n=len(test),
            auroc=roc_auc_score(gold, scores) if len(set(gold)) > 1 else None,
            balanced_accuracy=balanced_accuracy_score(gold, predicted),
            hybrid_balanced_accuracy=hybrid, nli_share=share, scores=scores, gold=gold,
        ))
    return out


def _with(model: SignalModel, **changes: Any) -> SignalModel:
    from dataclasses import replace

    return replace(model, **changes)

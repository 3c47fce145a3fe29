"""Calibration to a user's own domain: the decision fitted on their labelled examples.

A threshold learnt on our dev sets transfers imperfectly to a domain we never saw; a few
dozen labelled examples of the user's own fix that. ``fit_calibration`` chooses, by
stratified k-fold cross-validation, the cut on each sentence's P(unsupported) (1 - its
score) that flags it, and, with enough examples, refits the fused classifier's weights;
the figure it reports is the out-of-fold balanced accuracy, never the training one.
A calibration names the backend, model, detectors and NLI prompt it was fitted for, and
is refused anywhere else (``ensure_applies``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ConfigError, InputError
from conli.models import CalibrationUse, Verdict
from conli.training.data import ExampleRows
from conli.version import __version__

FORMAT: Literal["conli-calibration-1"] = "conli-calibration-1"
MIN_EXAMPLES = 20  # fewer cannot place a threshold with any confidence
MIN_PER_LABEL = 5
MIN_FOR_WEIGHTS = 200  # refitting the fused weights needs this many examples with features
FOLDS = 5


class Calibration(BaseModel):
    """The calibration file: what it was fitted for, the fitted decision, how it scored."""

    format: Literal["conli-calibration-1"] = FORMAT
    backend: str
    model: str
    detectors: list[str] = Field(description="the detectors it was fitted for, in order")
    nli_prompt: str
    method: Literal["threshold", "fused_weights"]
    flag_at: float | None = Field(
        default=None,
        ge=0.0, le=1.0, description="a sentence is hallucinated when its P(unsupported) "
        "(1 - score) is at or above this")
    fused_model: dict[str, Any] | None = Field(
        default=None,
        description="refitted fused classifier (method fused_weights), with its threshold")
    examples: int = Field(ge=1)
    hallucinated: int = Field(ge=0)
    data_sha256: str
    folds: int = Field(ge=2)
    balanced_accuracy_before: float = Field(ge=0.0, le=1.0)
    balanced_accuracy_after: float = Field(
        ge=0.0, le=1.0, description="cross-validated: each fold scored by a fit without it")
    created_utc: str
    conli_version: str


@dataclass(frozen=True)
class Applied:
    """A loaded calibration and the record results carry of it."""

    calibration: Calibration
    use: CalibrationUse


def load_calibration(path: Path) -> Applied:
    """Read a calibration file; ``ConfigError`` naming what is wrong with a bad one."""
    try:
        raw = path.read_bytes()
        calibration = Calibration.model_validate_json(raw)
    except OSError as exc:
        raise ConfigError(f"cannot read the calibration {path}: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or "file"
        raise ConfigError(f"{path} is not a conli calibration ({where}: {problem['msg']})"
                          ) from exc
    if (calibration.method == "threshold") != (calibration.flag_at is not None) or (
            calibration.method == "fused_weights") != (calibration.fused_model is not None):
        raise ConfigError(f"{path}: method {calibration.method} does not match its contents")
    use = CalibrationUse(file=str(path), sha256=hashlib.sha256(raw).hexdigest(),
                         method=calibration.method, flag_at=calibration.flag_at)
    return Applied(calibration, use)


def ensure_applies(calibration: Calibration, *, backend: str, model: str,
                   detectors: Sequence[str], nli_prompt: str) -> None:
    """Refuse a calibration fitted for another backend, model, detector list or prompt."""
    wanted = {"backend": backend, "model": model, "detectors": list(detectors),
              "nli_prompt": nli_prompt}
    for name, value in wanted.items():
        fitted = getattr(calibration, name)
        if fitted != value:
            raise ConfigError(
                f"the calibration was fitted for {name} {fitted!r}, but this run uses "
                f"{value!r}; calibrate again for this set-up (conli calibrate)")
    if calibration.method == "fused_weights" and "fused" not in detectors:
        raise ConfigError("the calibration refits the fused detector, which this run does "
                          "not use")


def calibrated_verdict(score: float | None, flag_at: float) -> Verdict | None:
    """A sentence's verdict under a threshold calibration (None: no score to cut)."""
    if score is None:
        return None
    return "hallucinated" if 1.0 - score >= flag_at else "supported"


@dataclass(frozen=True)
class Scored:
    """One labelled response as the uncalibrated detectors left it."""

    label: bool
    verdict: Verdict
    support: float | None  # the response's lowest sentence score
    rows: ExampleRows | None = None  # the fused features of its sentences, if recorded


def refuse_unusable(labels: Sequence[bool], folds: int, *, left_out: int = 0) -> None:
    """``InputError`` (nothing is fitted or written) when the labels cannot calibrate.

    ``left_out``: examples of the file that could not be checked and are not in ``labels``.
    """
    positives = sum(labels)
    negatives = len(labels) - positives
    has = (f"the file has, leaving out the {left_out} that could not be checked," if left_out
           else "the file has")
    if len(labels) < MIN_EXAMPLES:
        raise InputError(f"calibration needs at least {MIN_EXAMPLES} labelled examples; "
                         f"{has} {len(labels)}")
    if not positives or not negatives:
        only = "hallucinated" if positives else "faithful"
        raise InputError(f"every example is labelled {only}: calibration needs both labels"
                         + (f" ({left_out} could not be checked)" if left_out else ""))
    if min(positives, negatives) < max(MIN_PER_LABEL, folds):
        raise InputError(
            f"calibration needs at least {max(MIN_PER_LABEL, folds)} examples of each label "
            f"for {folds}-fold cross-validation; {has} {positives} hallucinated and "
            f"{negatives} faithful")


def fit_calibration(scored: Sequence[Scored], *, folds: int = FOLDS, seed: int = 0,
                    fused_features: Sequence[str] = (), fused_keep: Sequence[str] = ()
                    ) -> tuple[float | None, dict[str, Any] | None, float, float]:
    """(flag_at, fused model, BAcc before, cross-validated BAcc after) on ``scored``.

    The threshold is always fitted; the fused weights too when there are at least
    ``MIN_FOR_WEIGHTS`` examples with features, and they are kept only if their
    cross-validated figure beats the threshold's.
    """
    from sklearn.metrics import balanced_accuracy_score

    labels = [s.label for s in scored]
    refuse_unusable(labels, folds)
    usable = [s for s in scored if s.support is not None]
    if len(usable) < MIN_EXAMPLES:
        raise InputError(f"only {len(usable)} examples have a support score; calibration "
                         "needs a backend that reports log-probabilities")
    before = balanced_accuracy_score(labels, [predict(None, s) for s in scored])
    threshold_oof = _cross_validated(scored, folds, seed, _fit_threshold)
    after = balanced_accuracy_score(labels, threshold_oof)
    flag_at = _fit_threshold(list(scored))
    with_rows = [s for s in scored if s.rows is not None]
    if fused_features and len(with_rows) >= MIN_FOR_WEIGHTS and len(with_rows) == len(scored):
        def weights(train: list[Scored]) -> Any:
            return _fit_weights(train, fused_features, fused_keep)

        try:
            weights_oof = _cross_validated(scored, folds, seed, weights)
        except ValueError:  # a fold without a labelled sentence of each kind
            return flag_at, None, before, after
        weights_after = balanced_accuracy_score(labels, weights_oof)
        if weights_after > after:
            return None, weights(list(scored)).to_json(), before, weights_after
    return flag_at, None, before, after


def _fit_threshold(train: list[Scored]) -> float:
    from conli.training.train import best_threshold

    usable = [s for s in train if s.support is not None]
    return best_threshold([1.0 - s.support for s in usable if s.support is not None],
                          [s.label for s in usable])


def _fit_weights(train: list[Scored], features: Sequence[str], keep: Sequence[str]) -> Any:
    from conli.training.train import fit

    rows = [s.rows for s in train if s.rows is not None]
    return fit(rows, features, "fused.calibrated", keep)


def predict(fitted: Any, example: Scored) -> bool:
    """The response verdict under ``fitted`` (a cut, a fused model, or None: uncalibrated).

    An unverified response stays unverified, which the evaluation scores as wrong.
    """
    if example.verdict == "unverified":
        return not example.label
    if fitted is None:
        return example.verdict == "hallucinated"
    if isinstance(fitted, float):
        return example.support is not None and 1.0 - example.support >= fitted
    from conli.training.train import response_score

    assert example.rows is not None
    return bool(response_score(fitted, example.rows) >= fitted.threshold)


def _cross_validated(scored: Sequence[Scored], folds: int, seed: int, fitter: Any) -> list[bool]:
    """Out-of-fold calibrated verdicts: each example predicted by a fit without its fold."""
    from sklearn.model_selection import StratifiedKFold

    labels = [s.label for s in scored]
    predicted = [False] * len(scored)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for train_index, test_index in splitter.split(labels, labels):
        fitted = fitter([scored[i] for i in train_index])
        for i in test_index:
            predicted[i] = predict(fitted, scored[i])
    return predicted


def calibration_record(*, backend: str, model: str, detectors: Sequence[str], nli_prompt: str,
                       fitted: tuple[float | None, dict[str, Any] | None, float, float],
                       labels: Sequence[bool], data: bytes, folds: int) -> Calibration:
    """The file's contents for a fit made by ``fit_calibration``."""
    flag_at, fused_model, before, after = fitted
    return Calibration(
        backend=backend, model=model, detectors=list(detectors), nli_prompt=nli_prompt,
        method="threshold" if fused_model is None else "fused_weights", flag_at=flag_at,
        fused_model=fused_model, examples=len(labels), hallucinated=sum(labels),
        data_sha256=hashlib.sha256(data).hexdigest(), folds=folds,
        balanced_accuracy_before=before, balanced_accuracy_after=after,
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"), conli_version=__version__)


def calibration_for(settings: Settings, backend: Backend, names: list[str]) -> Applied | None:
    """The calibration ``settings`` name, checked against this backend and detector list."""
    if settings.calibration is None:
        return None
    applied = load_calibration(settings.calibration)
    ensure_applies(applied.calibration, backend=backend.name, model=backend.model,
                   detectors=names, nli_prompt=settings.nli_prompt)
    return applied

"""Fused artifacts held out: what one was trained on, and decisions paired with cot's.

``per_set`` is a decision's balanced accuracy on each dev set; ``gain_interval`` its gain
on the mean of sets over a baseline's (cot's, by default), by the project's one paired
bootstrap (``rule.decide``); ``trained_on`` and ``with_v1_nli`` rebuild what a fused
artifact was trained on. ``pct`` and ``signed`` write the figures. The detector-training
experiments (benchmarks/experiments/) read these, so they import the package, never each
other; stored runs are compared by ``conli.evaluation.compare``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from conli.detectors.fused import nli_features
from conli.evaluation.detection import Outcome, read_predictions, run_order, stratified_sample
from conli.evaluation.loaders import DATASETS, load_dataset
from conli.evaluation.rule import DRAWS, Paired, decide
from conli.signals.model import SignalModel
from conli.training.data import ExampleRows
from conli.training.train import SEED, HeldOut

NLI_KEYS = ("nli_support", "nli_flagged", "nli_contradiction")  # what a v1 run replaces


def pct(value: float | None) -> str:
    """A 0-1 figure as a percentage with one decimal; a dash for none."""
    return "–" if value is None else f"{100 * value:.1f}"


def signed(value: float) -> str:
    """A 0-1 difference as signed percentage points."""
    return f"{100 * value:+.1f}"


def per_set(rows: Sequence[ExampleRows], flagged: Callable[[ExampleRows], bool]
            ) -> dict[str, float]:
    """Balanced accuracy of ``flagged`` on each dataset's rows, and their mean.

    A set whose rows hold one label only has no balanced accuracy and is left out.
    """
    from sklearn.metrics import balanced_accuracy_score

    out = {dataset: balanced_accuracy_score(
        [r.label for r in rows if r.dataset == dataset],
        [flagged(r) for r in rows if r.dataset == dataset])
        for dataset in sorted({r.dataset for r in rows})
        if len({r.label for r in rows if r.dataset == dataset}) == 2}
    out["mean"] = statistics.mean(out.values())
    return out


def gain_interval(held: Sequence[HeldOut], rows: Sequence[ExampleRows], draws: int = DRAWS,
                  baseline: Callable[[ExampleRows], bool] = ExampleRows.cot_flagged,
                  ) -> tuple[float, float, float]:
    """Mean-of-sets BAcc of the held-out decisions minus the baseline's (cot's), with 95% bounds.

    The project's paired bootstrap (``rule.decide``): each set's examples are resampled
    with their labels kept apart, both decisions scored on the same draw.
    """
    sets = {h.dataset: Paired(h.gold, [float(p) for p in h.predicted],
                              [float(baseline(r)) for r in rows if r.dataset == h.dataset])
            for h in held}
    mean = decide(sets, "bacc", draws=draws, seed=SEED).mean
    return mean.point, mean.low, mean.high


def held_decisions(rows: Sequence[ExampleRows], flags: dict[str, bool]) -> list[HeldOut]:
    """``flags`` as one ``HeldOut`` a set (gold labels and decisions only), in set order."""
    return [HeldOut(d, len(mine), None, 0.0, None, None, [], [r.label for r in mine],
                    [flags[r.example_id] for r in mine])
            for d in sorted({r.dataset for r in rows})
            for mine in [[r for r in rows if r.dataset == d]]]


# --- what a fused artifact was trained on -------------------------------------------------


def with_v1_nli(rows: list[ExampleRows], predictions: Path) -> tuple[list[ExampleRows], int]:
    """``rows`` with their NLI features from a v1 run; and how many could not be matched.

    The reading's features and the labels stay the rows' own. Sentences are matched by
    their count and indices (the rows hold no text); a row whose v1 run checked other
    sentences is left out and counted.
    """
    v1 = {o.example_id: o.result for o in read_predictions(predictions, Outcome.from_json)
          if o.result}
    out, unmatched = [], 0
    for row in rows:
        result = v1.get(row.example_id)
        checked = [s for s in result.sentences if s.checked] if result else []
        if len(checked) != len(row.sentences) or any(
                s.index != r.index for s, r in zip(checked, row.sentences, strict=True)):
            unmatched += 1
            continue
        sentences = [replace(r, values={**r.values, **{k: v for k, v in nli_features(
            s.judgements).items() if k in NLI_KEYS}})
            for s, r in zip(checked, row.sentences, strict=True)]
        out.append(replace(row, sentences=sentences))
    return out, unmatched


def trained_on(model: SignalModel, data_dir: Path) -> set[str]:
    """Ids of the dev examples an artifact was trained on, from its training manifest.

    The fused artifacts record the run they read: the first ``n`` examples of the seeded,
    set-interleaved order of a ``limit_per_set`` sample (``conli eval detect``'s order).
    """
    training = model.training
    n = training["leave_one_dataset_out"]["n"]
    sets = [stratified_sample(load_dataset(name, data_dir), training["limit_per_set"],
                              training["seed"]) for name in DATASETS]
    return {e.id for e in run_order(sets, training["seed"])[:n]}

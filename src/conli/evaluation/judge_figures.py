"""The judge evaluation's figures: residuals, progression slopes, targets, intervals, plot.

Pure functions of scored rows (``judge_eval.Scored``), so a stored run can be re-scored
without the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from statistics import mean
from typing import Any

from conli.errors import ConfigError, install_hint
from conli.evaluation.judge_eval import EXPECTED, Scored

Doc = tuple[str, str]  # (dataset, item id): ``Scored.doc``


def residual_table(scored: Sequence[Scored]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per mode and task: mean |expected - predicted|; unverified counted, and as worst (4)."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for mode in sorted({s.mode for s in scored}):
        table[mode] = {}
        for task in (*EXPECTED, "all"):
            rows = [s for s in scored if s.mode == mode and s.task.expected is not None
                    and s.task.pct in (None, 0) and (task == "all" or s.task.task == task)]
            if not rows:
                continue
            residuals = [abs(r.task.expected - r.score) for r in rows
                         if r.task.expected is not None and r.score is not None]
            table[mode][task] = {
                "n": len(rows),
                "unverified": len(rows) - len(residuals),
                "residual": mean(residuals) if residuals else None,
                "residual_unverified_as_4": mean(residuals + [4] * (len(rows) - len(residuals))),
                "mean_score": mean(r.score for r in rows if r.score is not None)
                if residuals else None,
            }
    return table


def progression(scored: Sequence[Scored]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per mode and kind: mean score at each percentage and the slope per 20% step.

    0% is the gold full text of the same items; only items with a full progression count.
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for mode in sorted({s.mode for s in scored}):
        out[mode] = {}
        gold = {s.doc: s.score for s in scored
                if s.mode == mode and s.task.task == "gold_full"}
        for kind in ("intrinsic", "extrinsic"):
            rows = [s for s in scored if s.mode == mode and s.task.task == f"progression_{kind}"]
            if not rows:
                continue
            by_pct: dict[int, list[float | None]] = {0: [gold.get(i) for i in
                                                          sorted({r.doc for r in rows})]}
            for r in rows:
                by_pct.setdefault(r.task.pct or 0, []).append(r.score)
            means = {pct: (mean(v for v in values if v is not None)
                           if any(v is not None for v in values) else None)
                     for pct, values in sorted(by_pct.items())}
            unverified = {pct: sum(v is None for v in values) for pct, values in by_pct.items()}
            out[mode][kind] = {"mean_score": means, "unverified": unverified,
                               "delta_per_step": slope(rows, gold), "items": len(by_pct[0])}
    return out


def auroc_by_set(scored: Sequence[Scored]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per mode and dataset: AUROC of 6 - score for "the text has a wrong sentence".

    Over the evaluation's own texts: gold texts (whole or one sentence) against every text
    with a swapped or added error; unverified texts are left out and counted.
    """
    from conli.evaluation.metrics import auroc

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for mode in sorted({s.mode for s in scored}):
        rows = [s for s in scored if s.mode == mode]
        for dataset in [*sorted({s.dataset for s in rows}), "all"]:
            kept = [s for s in rows if dataset in ("all", s.dataset)]
            known = [s for s in kept if s.score is not None]
            wrong = [not s.task.task.startswith("gold") for s in known]
            out.setdefault(mode, {})[dataset] = {
                "auroc": auroc(wrong, [6 - float(s.score or 0) for s in known]),
                "n": len(known), "unverified": len(kept) - len(known)}
    return out


def slope(rows: Sequence[Scored], gold: dict[Doc, float | None]) -> float | None:
    """Score change per 20% of hallucinated sentences (seed 003's table 4).

    The least-squares slope over every (percentage, score) point, gold texts at 0%. Items
    of 3, 4 and 5 sentences put their steps at different percentages; a fitted slope uses
    every point, where the end-to-end difference would use two.
    """
    import numpy as np

    points = [(0.0, g) for item, g in gold.items() if g is not None
              and any(r.doc == item for r in rows)]
    points += [(float(r.task.pct or 0), r.score) for r in rows if r.score is not None]
    if len({p for p, _ in points}) < 2:
        return None
    x, y = np.asarray([p for p, _ in points]), np.asarray([s for _, s in points], dtype=float)
    return float(np.polyfit(x, y, 1)[0] * 20)


def targets(scored: Sequence[Scored]) -> dict[str, dict[str, Any]]:
    """Per mode: gold texts scored >= 4 and 5, fully hallucinated <= 2 (scores rounded)."""
    out: dict[str, dict[str, Any]] = {}
    for mode in sorted({s.mode for s in scored}):
        gold = [s.score for s in scored if s.mode == mode and s.task.task == "gold_full"]
        full = [s.score for s in scored
                if s.mode == mode and s.task.task.startswith("progression") and s.task.pct == 100]
        timed = [s.seconds for s in scored if s.mode == mode and s.seconds is not None]
        statuses = [s.reasoning_status for s in scored
                    if s.mode == mode and s.reasoning_status is not None]
        out[mode] = {
            "gold_at_least_4": _share([s is not None and s >= 3.5 for s in gold]),
            "gold_scored_5": _share([s is not None and s >= 4.5 for s in gold]),
            "gold_n": len(gold),
            "all_hallucinated_at_most_2": _share([s is not None and s <= 2.5 for s in full]),
            "all_hallucinated_n": len(full),
            "judge_seconds_mean": mean(timed) if timed else None, "judge_calls_timed": len(timed),
            "reasoning_checked": _share([s == "checked" for s in statuses]),
            "reasoning_n": len(statuses),
            "dropped_errors": sum(s.dropped_errors for s in scored if s.mode == mode),
            "below_5_untied": _untied(s for s in scored if s.mode == mode),
        }
    return out


def _untied(rows: Iterable[Scored]) -> float | None:
    """Share of texts scored below 5 (rounded) with no error tied to a sentence (rubric).

    Such a deduction has no reason an auditor can check; grounded scores always have one.
    """
    below = [s for s in rows if s.mode == "rubric" and s.score is not None and s.score < 4.5]
    return _share([s.tied_errors == 0 for s in below])


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def bootstrap_intervals(
    scored: Sequence[Scored], seed: int, resamples: int = 2000
) -> dict[str, dict[str, list[float] | None]]:
    """95% percentile intervals, resampling documents: residual, slopes, shares and AUROC."""
    items = sorted({s.doc for s in scored})
    out: dict[str, dict[str, list[float] | None]] = {}
    for mode in sorted({s.mode for s in scored}):
        mine = [s for s in scored if s.mode == mode]
        statistics = {"residual_all": _residual_all, "delta_intrinsic": _delta_of("intrinsic"),
                      "delta_extrinsic": _delta_of("extrinsic"),
                      "gold_at_least_4": _target_of("gold_at_least_4"),
                      "all_hallucinated_at_most_2": _target_of("all_hallucinated_at_most_2")}
        out[mode] = {name: _interval(mine, items, statistic, seed, resamples)
                     for name, statistic in statistics.items()}
        # AUROC per set over that set's documents alone, and over every document
        for dataset in [*sorted({s.dataset for s in mine}), "all"]:
            own = [s for s in mine if dataset in ("all", s.dataset)]
            out[mode][f"auroc_{dataset}"] = _interval(
                own, sorted({s.doc for s in own}), _auroc_of(dataset), seed, resamples)
    return out


def _auroc_of(dataset: str) -> Callable[[Sequence[Scored]], float | None]:
    def area(rows: Sequence[Scored]) -> float | None:
        value = next(iter(auroc_by_set(rows).values()), {}).get(dataset, {}).get("auroc")
        return None if value is None else float(value)
    return area


def _residual_all(rows: Sequence[Scored]) -> float | None:
    """The overall residual of one mode's rows."""
    table = next(iter(residual_table(rows).values()), {})
    value = table.get("all", {}).get("residual")
    return None if value is None else float(value)


def _delta_of(kind: str) -> Callable[[Sequence[Scored]], float | None]:
    """The slope per step of one kind, over one mode's rows."""
    def delta(rows: Sequence[Scored]) -> float | None:
        value = next(iter(progression(rows).values()), {}).get(kind, {}).get("delta_per_step")
        return None if value is None else float(value)
    return delta


def _target_of(name: str) -> Callable[[Sequence[Scored]], float | None]:
    def share(rows: Sequence[Scored]) -> float | None:
        value = next(iter(targets(rows).values()), {}).get(name)
        return None if value is None else float(value)
    return share


def _interval(rows: Sequence[Scored], items: Sequence[Doc],
              statistic: Callable[[Sequence[Scored]], float | None], seed: int,
              resamples: int) -> list[float] | None:
    import numpy as np  # the eval extra's, imported here so `conli check` never needs them
    from scipy.stats import bootstrap

    by_item = {item: [r for r in rows if r.doc == item] for item in items}
    if len(items) < 2 or statistic(rows) is None:
        return None

    def on(indices: Any) -> float:
        value = statistic([r for i in indices for r in by_item[items[int(i)]]])
        return float("nan") if value is None else value

    result = bootstrap((np.arange(len(items)),), on, vectorized=False, n_resamples=resamples,
                       method="percentile", random_state=seed)
    low, high = result.confidence_interval
    return [float(low), float(high)]


def plot_progression(progress: dict[str, dict[str, dict[str, Any]]], path: Any) -> Any:
    """Write a PNG: score against hallucination percentage, one panel per kind."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the eval extra
        raise ConfigError(f"the plot needs matplotlib: {install_hint('eval')}") from exc
    figure, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for axis, kind in zip(axes, ("intrinsic", "extrinsic"), strict=True):
        for mode, kinds in progress.items():
            if kind not in kinds:
                continue
            points = [(int(p), s) for p, s in kinds[kind]["mean_score"].items() if s is not None]
            axis.plot([p for p, _ in points], [s for _, s in points], marker="o",
                      label=f"{mode} (slope/step {kinds[kind]['delta_per_step']:+.2f})"
                      if kinds[kind]["delta_per_step"] is not None else mode)
        axis.set_title(f"{kind} hallucination")
        axis.set_xlabel("hallucinated sentences (%)")
        axis.set_xticks([0, 20, 40, 60, 80, 100])
        axis.set_ylim(0.8, 5.2)
        axis.grid(alpha=0.3)
        axis.legend()
    axes[0].set_ylabel("mean judge score (1-5)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path

"""Judge evaluation (seed 003): residuals, and the score progression over 0-100% hallucination.

Each item is a faithful summary cut to 3-5 sentences (as many as it has, up to five, so the
progression has seed 003's 20% steps where the texts allow it). Residuals compare gold and
single-sentence hallucinated text; the progression swaps in one more hallucinated sentence
per step. Variants are rule-based: an *intrinsic* variant contradicts the source by
swapping a number, a date, a named entity (for another of the same type from the source)
or by negating an auxiliary; an *extrinsic* variant appends a clause the source lacks.

Modes: ``rubric`` asks the rubric judge (its score a distribution's mean where the backend
gives log-probabilities); ``grounded`` checks each text with the configured detectors (the
product's default unless ``--detector``; the verdicts of one item's sentences are shared
through the call cache), and its score comes from a monotone scale fitted on the *other*
datasets' items (``lodo_grounded``): every figure is leave-one-dataset-out, as detection's
are. The scale fitted on every item is what ``--write-scale`` ships.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from statistics import mean
from time import perf_counter
from typing import Any

from conli.agents.grounded_judge import Scale, evidence, grounded_judge
from conli.agents.judge import judge
from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ConfigError, install_hint
from conli.evaluation.loaders import Example
from conli.plan import make_plan, options
from conli.training.perturb import extrinsic_variant, intrinsic_variant

EXPECTED = {"gold_full": 5, "gold_sentence": 5, "intrinsic_sentence": 1, "extrinsic_sentence": 1}
Entities = Callable[[str], list[tuple[str, str]]]  # text -> [(entity text, NER label)]
MODES = ("grounded", "rubric")

# --- items, tasks and scores -------------------------------------------------------------


@dataclass
class JudgeItem:
    """A gold response cut to ``k`` sentences, with one intrinsic and extrinsic variant each."""

    id: str
    source: str
    gold: list[str]
    intrinsic: list[str | None]
    extrinsic: list[str]
    rules: list[str | None] = field(default_factory=list)
    dataset: str = ""


def build_items(
    examples: Sequence[Example], split: Callable[[str], list[str]], entities: Entities | None,
    *, sentences: tuple[int, int], limit: int | None, seed: int,
) -> list[JudgeItem]:
    """Gold examples with at least ``sentences[0]`` sentences, cut to at most ``sentences[1]``.

    One item a document (the bootstrap resamples documents), at most ``limit``.
    """
    fewest, most = sentences
    rng = random.Random(seed)
    items: list[JudgeItem] = []
    seen: set[str] = set()
    for example in examples:
        if example.label or example.source in seen:
            continue
        gold = split(example.response)[:most]
        if len(gold) < fewest:
            continue
        pool = entities(example.source) if entities else []
        intrinsic, rules = [], []
        for sentence in gold:
            found = intrinsic_variant(sentence, rng, entities(sentence) if entities else [], pool)
            intrinsic.append(found[0] if found else None)
            rules.append(found[1] if found else None)
        extrinsic = [extrinsic_variant(s, rng, example.source) for s in gold]
        seen.add(example.source)
        items.append(JudgeItem(example.id, example.source, gold, intrinsic, extrinsic, rules,
                               example.dataset))
        if limit is not None and len(items) >= limit:
            break
    return items


@dataclass(frozen=True)
class Task:
    """One text to score and what the score should be (``pct`` for progression tasks)."""

    item: str
    task: str
    text: str
    expected: int | None
    pct: int | None = None

    @property
    def target(self) -> float:
        """What a faithful judge scores it: ``expected``, or 5 down to 1 along the steps."""
        if self.expected is not None:
            return float(self.expected)
        return 5.0 - 4.0 * (self.pct or 0) / 100


def plan_tasks(items: Sequence[JudgeItem], seed: int) -> list[Task]:
    """Residual tasks (one random sentence index per item) and the 0-100% progressions."""
    rng = random.Random(seed)
    tasks = []
    for item in items:
        k = len(item.gold)
        i = rng.randrange(k)
        tasks.append(Task(item.id, "gold_full", " ".join(item.gold), 5, 0))
        tasks.append(Task(item.id, "gold_sentence", item.gold[i], 5))
        intrinsic_i = item.intrinsic[i]
        if intrinsic_i is not None:
            tasks.append(Task(item.id, "intrinsic_sentence", intrinsic_i, 1))
        tasks.append(Task(item.id, "extrinsic_sentence", item.extrinsic[i], 1))
        order = rng.sample(range(k), k)  # nested: each step swaps one more sentence
        variants_by_kind: dict[str, Sequence[str | None]] = {
            "intrinsic": item.intrinsic, "extrinsic": item.extrinsic}
        for kind, variants in variants_by_kind.items():
            if any(v is None for v in variants):
                continue
            for swapped in range(1, k + 1):
                chosen = set(order[:swapped])
                text = " ".join(str(variants[j]) if j in chosen else item.gold[j] for j in range(k))
                tasks.append(Task(item.id, f"progression_{kind}", text, None,
                                  round(100 * swapped / k)))
    return tasks


@dataclass(frozen=True)
class Scored:
    """A task with the judge's score (None when unverified) under one mode.

    ``evidence``: grounded mode's 0-1 evidence, from which a scale gives the score.
    """

    task: Task
    mode: str
    score: float | None
    template: str
    dataset: str = ""
    error: str | None = None
    seconds: float | None = None  # the judge's own time: detection is not counted
    reasoning_status: str | None = None
    evidence: float | None = None
    dropped_errors: int = 0


def score_rubric(
    backend: Backend, items: Sequence[JudgeItem], tasks: Sequence[Task], settings: Settings,
    progress: Callable[[int, int], None] | None = None,
) -> list[Scored]:
    """Ask the rubric judge for every task's score."""
    by_id = {item.id: item for item in items}
    scored = []
    for number, task in enumerate(tasks, start=1):
        started = perf_counter()
        item = by_id[task.item]
        result, _ = judge(backend, item.source, task.text, settings)
        scored.append(Scored(task, "rubric", result.score, result.template, item.dataset,
                             result.error, perf_counter() - started, result.reasoning_status,
                             dropped_errors=result.dropped_errors))
        if progress is not None:
            progress(number, len(tasks))
    return scored


def grounded_evidence(
    backend: Backend, items: Sequence[JudgeItem], tasks: Sequence[Task], settings: Settings,
    reasoning_items: int, progress: Callable[[int, int], None] | None = None,
) -> list[Scored]:
    """Check each task's text with the configured detectors and keep its evidence.

    The score is left for ``lodo_grounded``. Reasoning is written (and timed) for the gold
    text and the 100% texts of the first ``reasoning_items`` items: it never changes the
    score, so the rest skip it.
    """
    from conli.pipeline import Checker

    checker = Checker(make_plan(settings, options(mitigate=False, judge=False)).settings, backend)
    by_id = {item.id: item for item in items}
    reasoned = {item.id for item in items[:reasoning_items]}
    scored = []
    for number, task in enumerate(tasks, start=1):
        item = by_id[task.item]
        sentences = checker.check(item.source, task.text).sentences
        share, _ = evidence(sentences)
        seconds = status = None
        if task.item in reasoned and (task.task == "gold_full" or task.pct == 100):
            started = perf_counter()
            result, _ = grounded_judge(backend, task.text, sentences, settings)
            seconds, status = perf_counter() - started, result.reasoning_status
        scored.append(Scored(task, "grounded", None, "judge_grounded.v1", item.dataset,
                             seconds=seconds, reasoning_status=status, evidence=share))
        if progress is not None:
            progress(number, len(tasks))
    return scored


def fit_scale(rows: Sequence[Scored], version: str = "grounded_scale.v1") -> Scale:
    """The isotonic (non-increasing) map from evidence to each task's target score."""
    from sklearn.isotonic import IsotonicRegression

    usable = [r for r in rows if r.evidence is not None]
    fitted = IsotonicRegression(increasing=False, y_min=1.0, y_max=5.0, out_of_bounds="clip")
    fitted.fit([r.evidence for r in usable], [r.task.target for r in usable])
    return Scale(version, tuple(round(float(v), 6) for v in fitted.X_thresholds_),
                 tuple(round(float(v), 6) for v in fitted.y_thresholds_))


def lodo_grounded(rows: Sequence[Scored], shipped: Scale) -> list[Scored]:
    """Every grounded row scored by a scale fitted on the other datasets' rows only.

    With one dataset there is nothing to fit on but the scored rows themselves: ``shipped``
    (fitted elsewhere) scores them instead, and the template says which scale it was.
    """
    out = []
    for dataset in sorted({r.dataset for r in rows}):
        others = [r for r in rows if r.dataset != dataset and r.evidence is not None]
        scale = fit_scale(others) if others else shipped
        out += [replace(r, score=scale(r.evidence), template=f"{r.template}+{scale.version}")
                for r in rows if r.dataset == dataset and r.evidence is not None]
    return out


# --- the figures --------------------------------------------------------------------------


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
        gold = {s.task.item: s.score for s in scored
                if s.mode == mode and s.task.task == "gold_full"}
        for kind in ("intrinsic", "extrinsic"):
            rows = [s for s in scored if s.mode == mode and s.task.task == f"progression_{kind}"]
            if not rows:
                continue
            by_pct: dict[int, list[float | None]] = {0: [gold.get(i) for i in
                                                          sorted({r.task.item for r in rows})]}
            for r in rows:
                by_pct.setdefault(r.task.pct or 0, []).append(r.score)
            means = {pct: (mean(v for v in values if v is not None)
                           if any(v is not None for v in values) else None)
                     for pct, values in sorted(by_pct.items())}
            unverified = {pct: sum(v is None for v in values) for pct, values in by_pct.items()}
            out[mode][kind] = {"mean_score": means, "unverified": unverified,
                               "delta_per_step": slope(rows, gold), "items": len(by_pct[0])}
    return out


def slope(rows: Sequence[Scored], gold: dict[str, float | None]) -> float | None:
    """Score change per 20% of hallucinated sentences (seed 003's table 4).

    The least-squares slope over every (percentage, score) point, gold texts at 0%. Items
    of 3, 4 and 5 sentences put their steps at different percentages; a fitted slope uses
    every point, where the end-to-end difference would use two.
    """
    import numpy as np

    points = [(0.0, g) for item, g in gold.items() if g is not None
              and any(r.task.item == item for r in rows)]
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
        }
    return out


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def bootstrap_intervals(
    scored: Sequence[Scored], seed: int, resamples: int = 2000
) -> dict[str, dict[str, list[float] | None]]:
    """95% percentile intervals, resampling documents: residual, slopes and the shares."""
    items = sorted({s.task.item for s in scored})
    out: dict[str, dict[str, list[float] | None]] = {}
    for mode in sorted({s.mode for s in scored}):
        mine = [s for s in scored if s.mode == mode]
        statistics = {"residual_all": _residual_all, "delta_intrinsic": _delta_of("intrinsic"),
                      "delta_extrinsic": _delta_of("extrinsic"),
                      "gold_at_least_4": _target_of("gold_at_least_4"),
                      "all_hallucinated_at_most_2": _target_of("all_hallucinated_at_most_2")}
        out[mode] = {name: _interval(mine, items, statistic, seed, resamples)
                     for name, statistic in statistics.items()}
    return out


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


def _interval(rows: Sequence[Scored], items: Sequence[str],
              statistic: Callable[[Sequence[Scored]], float | None], seed: int,
              resamples: int) -> list[float] | None:
    import numpy as np  # the eval extra's, imported here so `conli check` never needs them
    from scipy.stats import bootstrap

    by_item = {item: [r for r in rows if r.task.item == item] for item in items}
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


# --- the judge's AUROC on labelled data ---------------------------------------------------


def stored_grounded_scores(predictions: Any, scale: Scale) -> list[tuple[str, str, bool, float]]:
    """(example id, dataset, gold hallucinated, grounded score) from a stored detect run.

    The grounded score is computed from the sentence verdicts a ``conli eval detect`` run
    recorded, so its AUROC costs no model call; examples without a result are left out.
    """
    import json

    from conli.models import CheckResult

    rows = []
    for line in predictions.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if not record.get("result"):
            continue
        share, _ = evidence(CheckResult.model_validate(record["result"]).sentences)
        rows.append((record["example_id"], record["dataset"], bool(record["gold"]), scale(share)))
    return rows


def judge_auroc(
    stored: Sequence[tuple[str, str, bool, float]], examples: dict[str, Example],
    backend: Backend | None, settings: Settings, per_dataset: int,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """AUROC of 6 - score for "any hallucination" on labelled examples.

    Grounded on every stored example, and both modes on the first ``per_dataset`` of each
    set (the rubric judge needs the model; ``backend`` None skips it).
    """
    from conli.evaluation.metrics import auroc

    taken: dict[str, int] = {}
    sample = []
    for row in stored:
        if row[0] in examples and taken.get(row[1], 0) < per_dataset:
            taken[row[1]] = taken.get(row[1], 0) + 1
            sample.append(row)
    rubric: list[float | None] = []
    if backend is not None:
        for number, (example_id, _, _, _) in enumerate(sample, start=1):
            example = examples[example_id]
            result, _ = judge(backend, example.source, example.response, settings)
            rubric.append(result.score)
            if progress is not None:
                progress(number, len(sample))

    def area(rows: Sequence[tuple[bool, float | None]]) -> dict[str, Any]:
        kept = [(gold, score) for gold, score in rows if score is not None]
        return {"auroc": auroc([g for g, _ in kept], [6 - s for _, s in kept]), "n": len(kept),
                "unverified": len(rows) - len(kept)}

    out = {"grounded_all": area([(g, s) for _, _, g, s in stored]),
           "grounded_sample": area([(g, s) for _, _, g, s in sample])}
    if rubric:
        out["rubric_sample"] = area([(row[2], s) for row, s in zip(sample, rubric, strict=True)])
    return out

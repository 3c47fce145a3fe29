"""benchmarks/' scripts on stored runs: a run's decisions paired with cot's on the features file.

``per_set`` is a decision's balanced accuracy on each dev set; ``gain_interval`` its gain
on the mean of sets over a baseline's, by the project's one paired bootstrap
(``rule.decide``); ``compare`` pairs a stored run's flags (``read_run``) with cot's recorded
verdicts; ``trained_on`` and ``with_v1_nli`` rebuild what a fused artifact was trained
on. ``pct`` and ``signed`` write the figures. Shared here so the scripts import the
package, never each other.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from conli.detectors.fused import nli_features
from conli.evaluation.detection import Outcome, read_predictions, run_order, stratified_sample
from conli.evaluation.loaders import DATASETS, load_dataset
from conli.evaluation.report import write_results
from conli.evaluation.rule import DRAWS, Paired, decide
from conli.signals.model import SignalModel
from conli.training.data import ExampleRows
from conli.training.train import SEED, HeldOut

NLI_KEYS = ("nli_support", "nli_flagged", "nli_contradiction")  # what a v1 run replaces
Rule = Callable[[bool, bool], bool]  # (cot flagged, the run flagged) -> flagged
RULES: dict[str, Rule] = {"run": lambda cot, run: run, "both flag": lambda cot, run: cot and run,
                          "either flags": lambda cot, run: cot or run}


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


# --- a stored run against cot's recorded verdicts -----------------------------------------


def read_run(predictions: Path, exclude: Path | None = None) -> list[dict[str, Any]]:
    """A run's records that completed, read once per report.

    ``exclude``: another run's predictions, whose examples are left out (those a rule
    was chosen on, so that the rule is scored on the others).
    """
    chosen_on = {r["example_id"] for r in read_predictions(exclude)} if exclude else set()
    return [r for r in read_predictions(predictions)
            if r.get("error") is None and r["example_id"] not in chosen_on]


def run_flags(records: list[dict[str, Any]]) -> dict[str, bool]:
    """Each decided example's flag: anything but ``supported`` (unverified counts as a flag)."""
    return {r["example_id"]: r["predicted"] != "supported" for r in records if r.get("predicted")}


def run_scores(records: list[dict[str, Any]]) -> dict[str, float]:
    """Each decided example's response score (its most doubtful sentence's support)."""
    return {r["example_id"]: r["support_score"] for r in records
            if r.get("support_score") is not None}


def compare(rows: list[ExampleRows], flags: dict[str, bool],
            scores: dict[str, float] | None = None) -> dict[str, Any]:
    """Per set and on the mean: cot, the run and the combinations, with paired intervals.

    With ``scores``, also how well each ranks the paired examples (pooled AUROC of
    1 - support), for changes that move the score more than the decision.
    """
    from sklearn.metrics import roc_auc_score

    common = [r for r in rows if r.example_id in flags]
    by_set = {d: [r for r in common if r.dataset == d] for d in sorted({r.dataset for r in common})}
    report: dict[str, Any] = {"n": len(common), "cot": per_set(common, ExampleRows.cot_flagged)}
    for name, rule in RULES.items():
        def decided(r: ExampleRows, rule: Rule = rule) -> bool:
            return rule(r.cot_flagged(), flags[r.example_id])
        held = held_decisions(common, {r.example_id: decided(r) for r in common})
        report[name] = {"per_set": per_set(common, decided),
                        "gain_interval": list(gain_interval(held, common))}
    report["flips"] = dict(Counter(
        f"{'hallucinated' if r.label else 'faithful'}, now "
        f"{'flagged' if flags[r.example_id] else 'passed'}"
        for r in common if flags[r.example_id] != r.cot_flagged()))
    report["sets"] = {d: {"n": len(mine), "hallucinated": sum(r.label for r in mine)}
                      for d, mine in by_set.items()}
    if scores and all(r.example_id in scores for r in common):
        labels = [r.label for r in common]
        report["auroc"] = {
            "cot": roc_auc_score(labels, [1 - r.cot_support() for r in common]),
            "run": roc_auc_score(labels, [1 - scores[r.example_id] for r in common])}
    return report


def table_head(report: dict[str, Any], columns: list[str]) -> list[str]:
    """A paired table's heading, rule and example counts: the sets, then ``columns``."""
    sets = list(report["sets"])
    return [f"| decision | {' | '.join(sets)} | {' | '.join(columns)} |",
            "|---|" + "---|" * (len(sets) + len(columns)),
            "| n (hallucinated) | " + " | ".join(
                f"{report['sets'][d]['n']} ({report['sets'][d]['hallucinated']})"
                for d in sets) + " |" * (len(columns) + 1)]


def parse_args(doc: str, argv: list[str] | None) -> argparse.Namespace:
    """The options of a paired script: its run's predictions, the features file, --out."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--predictions", type=Path, required=True)
    parser.add_argument("--features", type=Path, default=Path("benchmarks/data/features/dev.jsonl"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--exclude", type=Path, default=None,
                        help="another run's predictions.jsonl: leave its examples out")
    return parser.parse_args(argv)


def finish(args: argparse.Namespace, meta: dict[str, Any], script: str,
           result: dict[str, Any], table: str, **extra: Any) -> int:
    """Write results.json (with what was read and how) and results.md; print the table."""
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"command": " ".join(["python", script, *sys.argv[1:]]),
              "predictions": str(args.predictions), "features": str(args.features),
              "excluded": str(args.exclude) if args.exclude else None,
              "features_commit": meta.get("git_commit"), **extra, "result": result}
    write_results(args.out, record, table)
    sys.stdout.write(table)
    return 0


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

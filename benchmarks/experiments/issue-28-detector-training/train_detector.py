"""Rebuild the trained detectors from stored features, and report them leave-one-dataset-out.

    # 1. record features: the fused detector on every dev example (resumable, cached)
    conli eval detect --dataset all --limit 100 --seed 0 --detector fused \\
        --out benchmarks/results/detect-fused-dev
    # 2. keep features and labels in the repository (no texts)
    python benchmarks/experiments/issue-28-detector-training/train_detector.py \\
        export --predictions benchmarks/results/detect-fused-dev \\
        --out benchmarks/data/features/dev.jsonl
    # 3. every detector leave-one-dataset-out, from the repository alone
    python benchmarks/experiments/issue-28-detector-training/train_detector.py \\
        fit --features benchmarks/data/features/dev.jsonl \\
        --out benchmarks/results/detectors-lodo
    # 4. fused.v1's recipe rebuilt from the repository alone (byte for byte): fused.v2
    python benchmarks/experiments/issue-28-detector-training/train_detector.py \\
        rebuild-fused --out benchmarks/results/fused-rebuild/fused.v2.json

Given the same features file, ``fit`` is deterministic. Its report holds every dev set
scored by models that never saw it, chain of thought's own verdicts on the same examples,
and each signal's AUROC alone. It writes no artifact: a refit is not what ships unless it
wins by the project's rule. ``signals.v1`` (``fast``) was trained with synthetic examples
whose readings are not in the repository, so it has no rebuild step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from conli.evaluation.detection import Outcome, predictions_digest, read_predictions
from conli.evaluation.loaders import DATASETS, dataset_path, load_dataset
from conli.evaluation.paired import (
    gain_interval,
    pct,
    per_set,
    signed,
    trained_on,
    with_v1_nli,
)
from conli.evaluation.report import file_digest, write_results
from conli.files import write_atomically
from conli.signals.features import FEATURES
from conli.signals.model import FUSED_ARTIFACT, SignalModel, load_model
from conli.training.data import ExampleRows, read_rows, rows_of, write_rows
from conli.training.train import (
    FUSED_CANDIDATES,
    FUSED_FEATURES,
    FUSED_KEEP,
    FUSED_VERSION,
    SEED,
    HeldOut,
    fit,
    leave_one_dataset_out,
    response_score,
)

SIGNALS = [name for name, _ in FEATURES]
FUSED_TRAINING_ROWS = 291  # fused.v1's training examples, the first of the v1 run's order
REBUILT_VERSION = "fused.v2"  # fused.v1's recipe, rebuilt from the repository


def export(args: argparse.Namespace) -> int:
    """Join a detect run's recorded features with the dev sets' labels."""
    outcomes = read_predictions(args.predictions, Outcome.from_json)
    run = json.loads((args.predictions / "results.json").read_text(encoding="utf-8"))
    examples = {(e.dataset, e.id): e for name in DATASETS
                for e in load_dataset(name, args.data_dir)}
    rows: list[ExampleRows] = []
    skipped = 0
    for outcome in outcomes:
        example = examples.get((outcome.dataset, outcome.example_id))
        found = rows_of(example, outcome.result.sentences) \
            if example is not None and outcome.result else None
        skipped += found is None
        rows += [found] if found is not None else []
    meta = {"predictions": str(args.predictions), "skipped": skipped,
            "command": run["provenance"]["command"],
            "git_commit": run["provenance"]["git_commit"],
            "templates": run["provenance"]["templates"], "detectors": run.get("detectors"),
            "data_files": {name: {"path": str(dataset_path(name, args.data_dir)),
                                  "sha256": file_digest(dataset_path(name, args.data_dir))}
                           for name in sorted(DATASETS)}}
    write_rows(args.out, sorted(rows, key=lambda r: (r.dataset, r.example_id)), meta)
    print(f"{len(rows)} examples written to {args.out} ({skipped} without features skipped)",
          file=sys.stderr)
    return 0


def fit_all(args: argparse.Namespace) -> int:
    """Fit every detector leave-one-dataset-out and report it (no artifact is written)."""
    meta, rows = read_rows(args.features)
    progress = lambda d: print(f"holding out {d}", file=sys.stderr)  # noqa: E731
    held = leave_one_dataset_out(rows, hybrid=True, progress=progress)
    # each fused feature set once; "shipped" is the artifact's own (FUSED_FEATURES)
    held_by = {name: leave_one_dataset_out(rows, features=features, version=FUSED_VERSION,
                                           keep=keep, progress=progress)
               for name, (features, keep) in FUSED_CANDIDATES.items()}
    held_fused = held_by["shipped"]
    report: dict[str, Any] = {
        "features_file": str(args.features), "features_meta": meta,
        "held_out": [_public(h) for h in held], "pooled": summary(held),
        "fused": {"held_out": [_public(h) for h in held_fused], "pooled": summary(held_fused)},
        "candidates": {name: candidate(held_by[name], *FUSED_CANDIDATES[name], rows=rows)
                       for name in FUSED_CANDIDATES},
        "cot": cot_alone(rows),
        "shipped": shipped_held_out(load_model(FUSED_ARTIFACT), rows, args.data_dir),
        "signal_auroc": signal_aurocs(rows),
        "counts": {d: sum(1 for r in rows if r.dataset == d) for d in sorted(DATASETS)},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    table = markdown(report)
    write_results(args.out, report, table)
    print(table)
    return 0


def rebuild_fused(args: argparse.Namespace) -> int:
    """Write ``fused.v2``, the shipped ``fused.v1``'s recipe, from the repository alone.

    ``fused.v1``'s own readings (from the fp16 output head) are gone, so it cannot be rebuilt.
    v2 takes its 291 training examples (the first of the v1 run's order), the v1 prompt's
    NLI outputs on them (that run's stored judgements) and the reading from the
    collection's features (the model's own numbers, which no prompt changes). Whether v2
    ships is decided by the project's rule, as any change of the default is.
    """
    meta, rows = read_rows(args.features)
    order = [o.example_id for o in read_predictions(args.v1_predictions, Outcome.from_json)]
    chosen = set(order[:FUSED_TRAINING_ROWS])
    v1_rows, _ = with_v1_nli([r for r in rows if r.example_id in chosen], args.v1_predictions)
    if len(v1_rows) != FUSED_TRAINING_ROWS:
        raise SystemExit(f"{len(v1_rows)} of the {FUSED_TRAINING_ROWS} training examples have "
                         f"features in {args.features} and a v1 judgement; all are needed")
    held = summary(leave_one_dataset_out(v1_rows, features=FUSED_FEATURES,
                                         version=FUSED_VERSION, keep=FUSED_KEEP))
    model = fit(v1_rows, FUSED_FEATURES, REBUILT_VERSION, FUSED_KEEP)
    digest = hashlib.sha256("\n".join(json.dumps(r.example_id) + json.dumps(
        [s.vector(FUSED_FEATURES) for s in r.sentences]) for r in v1_rows).encode()).hexdigest()
    model = replace(model, training={
        "features": list(FUSED_FEATURES), "seed": SEED, "limit_per_set": 100,
        "recipe": "the first 291 examples of the v1 run's order; NLI features from the v1 "
                  "run (v1_predictions), the reading from features_file",
        "v1_predictions": str(args.v1_predictions),
        "v1_predictions_sha256": predictions_digest(args.v1_predictions),
        "features_file": str(args.features), "training_rows_sha256": digest,
        "data_files": meta.get("data_files", {}),
        "leave_one_dataset_out": held})
    write_atomically(args.out, json.dumps(model.to_json(), indent=1) + "\n")
    print(f"wrote {args.out} from {len(v1_rows)} examples", file=sys.stderr)
    return 0


def shipped_held_out(model: SignalModel, rows: list[ExampleRows], data_dir: Path
                     ) -> dict[str, Any]:
    """The shipped fused weights, and cot, on the rows the weights were not trained on."""
    if "limit_per_set" not in model.training:  # a refit here: trained on every row
        return {"version": model.version, "n": 0}
    seen = trained_on(model, data_dir)
    unseen = [r for r in rows if r.example_id not in seen]
    if not unseen:
        return {"version": model.version, "n": 0}
    return {"version": model.version, "n": len(unseen),
            "counts": {d: sum(r.dataset == d for r in unseen) for d in sorted(DATASETS)},
            "fused": per_set(unseen, lambda r: response_score(model, r) >= model.threshold),
            "cot": cot_alone(unseen), "pooled_auroc": pooled_aurocs(model, unseen)}


def pooled_aurocs(model: SignalModel, rows: list[ExampleRows]) -> dict[str, float | None]:
    """How well each ranks responses, all rows pooled: fused's P and cot's 1 - support."""
    from sklearn.metrics import roc_auc_score

    labels = [r.label for r in rows]
    if len(set(labels)) < 2:
        return {"fused": None, "cot": None}
    return {"fused": roc_auc_score(labels, [response_score(model, r) for r in rows]),
            "cot": roc_auc_score(labels, [1 - r.cot_support() for r in rows])}


def summary(held: list[HeldOut]) -> dict[str, Any]:
    """Mean per-set AUROC and BAcc of a leave-one-dataset-out run (and the hybrid's)."""
    hybrids = [h.hybrid_balanced_accuracy for h in held if h.hybrid_balanced_accuracy is not None]
    return {"n": sum(h.n for h in held),
            "auroc": statistics.mean(h.auroc for h in held if h.auroc is not None),
            "balanced_accuracy": statistics.mean(h.balanced_accuracy for h in held),
            "hybrid": statistics.mean(hybrids) if hybrids else None}


def candidate(held: list[HeldOut], features: tuple[str, ...], keep: tuple[str, ...],
              rows: list[ExampleRows]) -> dict[str, Any]:
    """One fused feature set's leave-one-dataset-out run: the means, each set's BAcc, and
    the 95% interval of its gain over cot on the mean of sets."""
    return {**summary(held), "features": list(features), "keep": list(keep),
            "per_set": {h.dataset: h.balanced_accuracy for h in held},
            "gain_over_cot": gain_interval(held, rows)}


def cot_alone(rows: list[ExampleRows]) -> dict[str, float]:
    """Chain of thought's own balanced accuracy on the same examples, per set and mean."""
    return per_set(rows, ExampleRows.cot_flagged)


def signal_aurocs(rows: list[ExampleRows]) -> dict[str, float | None]:
    """Each signal alone as a response score (its worst sentence), pooled."""
    from sklearn.metrics import roc_auc_score

    out: dict[str, float | None] = {}
    labels = [r.label for r in rows]
    for name in SIGNALS:
        sign = -1 if name in _FALLS_WITH_ERROR else 1
        scores = [max(sign * s.values[name] for s in r.sentences) for r in rows]
        out[name] = roc_auc_score(labels, scores) if len(set(labels)) > 1 else None
    return out


# signals whose value is lower where a sentence is unsupported
_FALLS_WITH_ERROR = {"lp_mean", "lp_min", "pmi_mean", "pmi_min", "rouge_p", "best_sentence",
                     "align_min", "align_mean"}


def markdown(report: dict[str, Any]) -> str:
    """The leave-one-dataset-out table, then each signal's AUROC."""
    fused = {row["dataset"]: row for row in report["fused"]["held_out"]}
    lines = ["# Detectors leave-one-dataset-out (every set scored by models that never saw it)",
             "", f"Features: `{report['features_file']}`", "",
             "| dataset | n | fast AUROC | fast BAcc | hybrid BAcc | cot BAcc | fused AUROC | "
             "fused BAcc |", "|---|---|---|---|---|---|---|---|"]
    for row in report["held_out"]:
        other = fused.get(row["dataset"], {})
        lines.append(
            f"| {row['dataset']} | {row['n']} | {pct(row['auroc'])} | "
            f"{pct(row['balanced_accuracy'])} | {pct(row['hybrid_balanced_accuracy'])} | "
            f"{pct(report['cot'].get(row['dataset']))} | {pct(other.get('auroc'))} | "
            f"{pct(other.get('balanced_accuracy'))} |")
    pooled, joint = report["pooled"], report["fused"]["pooled"]
    lines.append(f"| **mean of sets** | {pooled['n']} | {pct(pooled['auroc'])} | "
                 f"{pct(pooled['balanced_accuracy'])} | {pct(pooled['hybrid'])} | "
                 f"{pct(report['cot'].get('mean'))} | {pct(joint['auroc'])} | "
                 f"{pct(joint['balanced_accuracy'])} |")
    lines += ["", "Fused feature sets (mean of sets, leave-one-dataset-out):", "",
              "| features | AUROC | BAcc | gain over cot [95% interval] | worst set against cot |",
              "|---|---|---|---|---|"]
    for name, c in report["candidates"].items():
        worst = min(c["per_set"], key=lambda d: c["per_set"][d] - report["cot"][d])
        kept = f"; keeps {', '.join(c['keep'])}" if c["keep"] != list(FUSED_KEEP) else ""
        gain, low, high = c["gain_over_cot"]
        lines.append(f"| {name} ({', '.join(c['features'])}{kept}) | {pct(c['auroc'])} | "
                     f"{pct(c['balanced_accuracy'])} | {signed(gain)} "
                     f"[{signed(low)}, {signed(high)}] | {worst} "
                     f"{pct(c['per_set'][worst] - report['cot'][worst])} |")
    lines += shipped_lines(report["shipped"])
    lines += ["", "Per signal (AUROC of the response's worst sentence; pooled):", ""]
    lines += [f"- {name}: {pct(v)}" for name, v in report["signal_auroc"].items()]
    return "\n".join(lines) + "\n"


def shipped_lines(shipped: dict[str, Any]) -> list[str]:
    """The shipped weights held out: a table, or why there is none."""
    head = ["", f"The shipped weights ({shipped['version']}) on the rows they were not "
            "trained on:", ""]
    if not shipped["n"]:
        return [*head, "none: every row here is in their training set"]
    lines = [*head, "| dataset | n | cot BAcc | shipped fused BAcc |", "|---|---|---|---|"]
    for dataset, n in shipped["counts"].items():
        lines.append(f"| {dataset} | {n} | {pct(shipped['cot'].get(dataset))} | "
                     f"{pct(shipped['fused'].get(dataset))} |")
    lines.append(f"| **mean of sets** | {shipped['n']} | {pct(shipped['cot']['mean'])} | "
                 f"{pct(shipped['fused']['mean'])} |")
    auroc = shipped["pooled_auroc"]
    return [*lines, "", f"Pooled AUROC: cot (1 - NLI support) {pct(auroc['cot'])}, "
            f"shipped fused {pct(auroc['fused'])}."]


def _public(held: HeldOut) -> dict[str, Any]:
    return {k: v for k, v in held.__dict__.items() if k not in ("scores", "gold", "predicted")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    out = steps.add_parser("export", help="features and labels of a detect run, for the repo")
    out.add_argument("--predictions", type=Path, required=True, help="a detect run's --out")
    out.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    out.add_argument("--out", type=Path, required=True)
    out.set_defaults(handler=export)
    train = steps.add_parser("fit", help="fit and report leave-one-dataset-out")
    train.add_argument("--features", type=Path, required=True)
    train.add_argument("--out", type=Path, required=True)
    train.add_argument("--data-dir", type=Path, default=Path("../shared/data"),
                       help="the dev sets, to know which rows the shipped weights saw")
    train.set_defaults(handler=fit_all)
    fused = steps.add_parser("rebuild-fused", help="fused.v1's recipe rebuilt from the repo")
    fused.add_argument("--features", type=Path, default=Path("benchmarks/data/features/dev.jsonl"))
    fused.add_argument("--v1-predictions", type=Path,
                       default=Path("benchmarks/results/detect-default"))
    fused.add_argument("--out", type=Path, required=True)
    fused.set_defaults(handler=rebuild_fused)
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())

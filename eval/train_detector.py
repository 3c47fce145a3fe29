"""Rebuild the signal classifier from the dev sets and report it leave-one-dataset-out.

    python eval/train_detector.py --readings /work/signals --out eval/results/signals-lodo
    python eval/train_detector.py ... --write-artifacts src/conli/signals

Readings come from ``eval/extract_signals.py`` (the model's forward passes; resumable):
``READINGS/dev-100`` for the dev examples (a prefix of the seed-0, set-interleaved order of
a 100-a-set sample: whatever the extraction reached) and ``READINGS/synthetic-15`` for the
synthetic errors (15 a set).
Given the same readings, training is deterministic.
The report holds every set scored by a model that never saw it (nor the synthetic errors
made from it), per-signal AUROCs beside the fused one, and the hybrid's balanced accuracy
with the chain-of-thought verdicts stored in ``--cot`` (a ``conli eval detect`` run).
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

from conli.detectors.fused import nli_features
from conli.evaluation.detection import run_order, stratified_sample
from conli.evaluation.loaders import DATASETS, dataset_path, load_dataset
from conli.files import write_atomically
from conli.models import Judgement
from conli.nlp import load_pipeline
from conli.signals.features import FEATURE_NAMES, FEATURES
from conli.training.data import ExampleRows, load_rows
from conli.training.synthetic import KINDS, synthetic_examples
from conli.training.train import (
    FUSED_FEATURES,
    FUSED_KEEP,
    FUSED_VERSION,
    SEED,
    HeldOut,
    SecondOpinion,
    choose_band,
    fit,
    leave_one_dataset_out,
)

LIMIT, PER_DATASET = 100, 15


Stored = dict[tuple[str, str], dict[int, dict[str, Any]]]


def stored_run(path: Path) -> Stored:
    """A stored detection run's checked sentences, by (dataset, example id) and index."""
    stored: Stored = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("result"):
            stored[(record["dataset"], record["example_id"])] = {
                s["index"]: s for s in record["result"]["sentences"] if s["checked"]
            }
    return stored


def second_opinion(stored: Stored, rows: list[ExampleRows]) -> SecondOpinion:
    """Each row's sentence verdicts in the stored run, in the rows' order."""
    return {key: [stored[key][s.index].get("verdict") if s.index in stored[key] else None
                  for s in r.sentences]
            for r in rows if (key := (r.dataset, r.example_id)) in stored}


def with_nli(stored: Stored, rows: list[ExampleRows]) -> list[ExampleRows]:
    """The rows the stored run judged whole, each sentence's values joined with what the
    fused detector reads of that run's NLI judgements (``nli_features``)."""
    out = []
    for row in rows:
        judged = stored.get((row.dataset, row.example_id))
        if judged is None or not all(judged.get(s.index, {}).get("judgements")
                                     for s in row.sentences):
            continue
        sentences = [replace(s, values={**s.values, **nli_features(
            [Judgement.model_validate(j) for j in judged[s.index]["judgements"]])})
            for s in row.sentences]
        out.append(replace(row, sentences=sentences))
    return out


def signal_aurocs(rows: list[ExampleRows]) -> dict[str, dict[str, float | None]]:
    """Each signal alone as a response score (its worst sentence), per set and pooled."""
    from sklearn.metrics import roc_auc_score

    real = [r for r in rows if not r.synthetic and r.sentences]
    out: dict[str, dict[str, float | None]] = {}
    for name in FEATURE_NAMES:
        values = [[s.values[name] for s in r.sentences] for r in real]
        direction = 1 if _rises_with_error(name) else -1
        scores = [max(direction * v for v in vs) for vs in values]
        out[name] = {}
        for dataset in [*sorted({r.dataset for r in real}), "pooled"]:
            picked = [(s, r.label) for s, r in zip(scores, real, strict=True)
                      if dataset in ("pooled", r.dataset)]
            labels = [g for _, g in picked]
            out[name][dataset] = (roc_auc_score(labels, [s for s, _ in picked])
                                  if len(set(labels)) > 1 else None)
    return out


def _rises_with_error(name: str) -> bool:
    return name in {"lp_low", "pmi_low", "ent_mean", "ent_max", "novel_words", "novel_numbers",
                    "novel_entities", "log_tokens"}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def markdown(report: dict[str, Any]) -> str:
    fused = {row["dataset"]: row for row in report["fused"]["held_out"]}
    lines = ["# Detectors leave-one-dataset-out (every set scored by models that never saw it)",
             "", "| dataset | n | fast AUROC | fast BAcc | hybrid BAcc | cot BAcc | "
             "fused AUROC | fused BAcc |", "|---|---|---|---|---|---|---|---|"]
    for row in report["held_out"]:
        other = fused.get(row["dataset"], {})
        lines.append(
            f"| {row['dataset']} | {row['n']} | {_pct(row['auroc'])} | "
            f"{_pct(row['balanced_accuracy'])} | {_pct(row['hybrid_balanced_accuracy'])} | "
            f"{_pct(report['cot'].get(row['dataset']))} | {_pct(other.get('auroc'))} | "
            f"{_pct(other.get('balanced_accuracy'))} |")
    pooled, joint = report["pooled"], report["fused"]["pooled"]
    lines.append(f"| **mean of sets** | {pooled['n']} | {_pct(pooled['auroc'])} | "
                 f"{_pct(pooled['balanced_accuracy'])} | {_pct(pooled['hybrid'])} | "
                 f"{_pct(report['cot'].get('mean'))} | {_pct(joint['auroc'])} | "
                 f"{_pct(joint['balanced_accuracy'])} |")
    lines += ["", "AUROC columns in the last row: mean of the per-set AUROCs.", "",
              "Per signal (AUROC of the sentence-worst value; pooled):", ""]
    lines += [f"- {name}: {_pct(v['pooled'])}" for name, v in report["signal_auroc"].items()]
    return "\n".join(lines) + "\n"


def summary(held: list[HeldOut]) -> dict[str, Any]:
    """Mean per-set AUROC and BAcc of a leave-one-dataset-out run (and the hybrid's)."""
    hybrids = [h.hybrid_balanced_accuracy for h in held if h.hybrid_balanced_accuracy is not None]
    return {"n": sum(h.n for h in held),
            "auroc": statistics.mean(h.auroc for h in held if h.auroc is not None),
            "balanced_accuracy": statistics.mean(h.balanced_accuracy for h in held),
            "hybrid": statistics.mean(hybrids) if hybrids else None}


def cot_alone(rows: list[ExampleRows], cot: SecondOpinion) -> dict[str, float]:
    """Chain of thought's own balanced accuracy on the same examples, per set and mean."""
    from sklearn.metrics import balanced_accuracy_score

    out: dict[str, float] = {}
    for dataset in sorted({r.dataset for r in rows}):
        usable = [r for r in rows if r.dataset == dataset and (r.dataset, r.example_id) in cot]
        flagged = [any(v != "supported" for v in cot[(r.dataset, r.example_id)]) for r in usable]
        out[dataset] = balanced_accuracy_score([r.label for r in usable], flagged)
    out["mean"] = statistics.mean(out.values())
    return out


def manifest(args: argparse.Namespace, held: dict[str, Any], synthetic: bool) -> dict[str, Any]:
    """How an artifact was made: data files and hashes, recipe, seed, honest scores."""
    return {
        "seed": SEED, "limit_per_set": LIMIT,
        "synthetic": {"kinds": list(KINDS), "per_dataset": PER_DATASET,
                      "recipe": "conli.training.synthetic"} if synthetic else None,
        "data_files": {name: {"path": str(dataset_path(name, args.data_dir)),
                              "sha256": sha256(dataset_path(name, args.data_dir))}
                       for name in DATASETS if dataset_path(name, args.data_dir).is_file()},
        "leave_one_dataset_out": held,
        "cot_predictions": str(args.cot),
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readings", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--cot", type=Path,
                        default=Path("eval/results/detect-default/predictions.jsonl"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--write-artifacts", type=Path, metavar="DIR",
                        help="write signals.v1.json and fused.v1.json here (src/conli/signals)")
    parser.add_argument("--no-synthetic", action="store_true")
    args = parser.parse_args()

    nlp = load_pipeline()
    planned = run_order([stratified_sample(load_dataset(n, args.data_dir), LIMIT, SEED)
                         for n in DATASETS], SEED)
    rows = load_rows(args.readings / "dev-100", planned, nlp)
    if not args.no_synthetic:
        synthetic = synthetic_examples(planned, nlp, seed=SEED, per_dataset=PER_DATASET)
        rows += load_rows(args.readings / f"synthetic-{PER_DATASET}", synthetic, nlp)
    stored = stored_run(args.cot)
    cot = second_opinion(stored, rows)
    progress = lambda d: print(f"holding out {d}", file=sys.stderr)  # noqa: E731
    held = leave_one_dataset_out(rows, cot, progress=progress)
    judged = with_nli(stored, [r for r in rows if not r.synthetic])
    held_fused = leave_one_dataset_out(judged, features=FUSED_FEATURES, version=FUSED_VERSION,
                                       keep=FUSED_KEEP, progress=progress)
    report: dict[str, Any] = {
        "held_out": [_public(h) for h in held], "pooled": summary(held),
        "fused": {"held_out": [_public(h) for h in held_fused], "pooled": summary(held_fused)},
        "cot": cot_alone(judged, cot),
        "signal_auroc": signal_aurocs(rows),
        "counts": {d: sum(1 for r in rows if r.dataset == d and not r.synthetic)
                   for d in DATASETS},
        "synthetic": sum(1 for r in rows if r.synthetic),
    }
    fast = fit(rows)
    fast = replace(fast, band=choose_band(fast, rows, cot),
                   training={"features": {n: d for n, d in FEATURES},
                             **manifest(args, report["pooled"], not args.no_synthetic)})
    fused = fit(judged, FUSED_FEATURES, FUSED_VERSION, FUSED_KEEP)
    fused = replace(fused, training={"features": list(FUSED_FEATURES),
                                     **manifest(args, report["fused"]["pooled"], False)})
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out / "results.json", json.dumps(report, indent=2) + "\n")
    write_atomically(args.out / "results.md", markdown(report))
    print(markdown(report))
    if args.write_artifacts:
        for model in (fast, fused):
            write_atomically(args.write_artifacts / f"{model.version}.json",
                             json.dumps(model.to_json(), indent=1) + "\n")
    return 0


def _public(held: HeldOut) -> dict[str, Any]:
    return {k: v for k, v in held.__dict__.items() if k not in ("scores", "gold")}


if __name__ == "__main__":
    raise SystemExit(main())

"""What ``conli calibrate`` gains on each dev set: calibrated on one half, scored on the other.

    python benchmarks/experiments/issue-28-detector-training/calibration_gain.py \\
        --features benchmarks/data/features/dev.jsonl \\
        --out benchmarks/results/calibration-gain

For each detector (``cot``; ``fused`` with its shipped features, weights fitted on the
other dev sets, since the shipped weights saw most of these rows) and each dev set, the
set's examples are split in two halves, stratified by label (seeded). ``fit_calibration``,
the function ``conli calibrate`` runs, is fitted on one half and its cut decides the other;
every example is thus decided by a calibration that never saw it. "Before" is the
uncalibrated decision on the same examples. A half that ``conli calibrate`` would refuse
(too few examples or too few of a label) is reported as refused, and its examples keep the
uncalibrated decision. No model is needed: the features file records what the detectors saw.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conli.calibration import Scored, fit_calibration, predict
from conli.errors import InputError
from conli.evaluation.report import publish
from conli.signals.model import SignalModel
from conli.training.data import ExampleRows, read_rows
from conli.training.train import FUSED_FEATURES, FUSED_KEEP, FUSED_VERSION, fit, response_score

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout

Decide = Callable[[ExampleRows], Scored]


def cot_scored(row: ExampleRows) -> Scored:
    """Chain of thought as shipped: its verdict, and its lowest NLI support as the score."""
    return Scored(row.label, "hallucinated" if row.cot_flagged() else "supported",
                  row.cot_support())


def fused_scored(model: SignalModel) -> Decide:
    """The fused detector with ``model``'s weights: its verdict and 1 - P(unsupported)."""
    def scored(row: ExampleRows) -> Scored:
        p = response_score(model, row)
        return Scored(row.label, "hallucinated" if p >= model.threshold else "supported", 1 - p)
    return scored


def halves(rows: Sequence[ExampleRows], seed: int) -> tuple[list[int], list[int]]:
    """Indices of two halves, each label split evenly between them."""
    first: list[int] = []
    second: list[int] = []
    for label in (True, False):
        indices = [i for i, r in enumerate(rows) if r.label == label]
        random.Random(f"{seed}:{label}").shuffle(indices)
        first += indices[0::2]
        second += indices[1::2]
    return sorted(first), sorted(second)


def one_set(rows: Sequence[ExampleRows], decide: Decide, folds: int, seed: int,
            only_gains: bool = False) -> dict[str, Any]:
    """Shipped against half-calibrated balanced accuracy on one dev set.

    ``only_gains``: a half's cut is used only where its own cross-validated figure beats
    the shipped decision on that half (what ``conli calibrate``'s warning advises).
    """
    from sklearn.metrics import balanced_accuracy_score

    scored = [decide(r) for r in rows]
    labels = [s.label for s in scored]
    shipped = [predict(None, s) for s in scored]
    calibrated = list(shipped)
    cuts: list[float | str] = []
    first, second = halves(rows, seed)
    for train, test in ((first, second), (second, first)):
        try:
            flag_at, _, before, after = fit_calibration([scored[i] for i in train],
                                                        folds=folds, seed=seed)
        except InputError as exc:
            cuts.append(f"refused: {exc}")
            continue
        if only_gains and after <= before:
            cuts.append("kept the shipped decision: no cross-validated gain")
            continue
        assert flag_at is not None  # a half is far below the examples a weights refit needs
        cuts.append(round(flag_at, 4))
        for i in test:
            calibrated[i] = predict(flag_at, scored[i])
    return {"n": len(rows), "hallucinated": sum(labels),
            "before": balanced_accuracy_score(labels, shipped),
            "after": balanced_accuracy_score(labels, calibrated), "cuts": cuts}


def report(rows: Sequence[ExampleRows], folds: int, seed: int, only_gains: bool = False
           ) -> dict[str, Any]:
    """Every detector on every dev set, with the mean of sets; nothing scored where it trained."""
    def fused_without(dataset: str) -> Decide:
        others = [r for r in rows if r.dataset != dataset]
        return fused_scored(fit(others, FUSED_FEATURES, FUSED_VERSION, FUSED_KEEP))

    detectors: dict[str, Callable[[str], Decide]] = {
        "cot": lambda _dataset: cot_scored, "fused (refit without the set)": fused_without}
    by_set: dict[str, list[ExampleRows]] = {}
    for row in rows:
        by_set.setdefault(row.dataset, []).append(row)
    out: dict[str, Any] = {}
    for name, decider in detectors.items():
        sets = {dataset: one_set(members, decider(dataset), folds, seed, only_gains)
                for dataset, members in sorted(by_set.items())}
        out[name] = {"sets": sets, "mean_before": statistics.mean(s["before"] for s in
                                                                  sets.values()),
                     "mean_after": statistics.mean(s["after"] for s in sets.values())}
    return out


def markdown(result: dict[str, Any]) -> str:
    """The table benchmarks.md quotes."""
    names = list(result)
    lines = ["| dataset | n | " + " | ".join(f"{n} shipped | {n} calibrated" for n in names)
             + " |", "|---|---|" + "---|---|" * len(names)]
    for dataset, first in result[names[0]]["sets"].items():
        cells = [f"{100 * result[n]['sets'][dataset]['before']:.1f} | "
                 f"{100 * result[n]['sets'][dataset]['after']:.1f}" for n in names]
        lines.append(f"| {dataset} | {first['n']} | " + " | ".join(cells) + " |")
    means = [f"{100 * result[n]['mean_before']:.1f} | {100 * result[n]['mean_after']:.1f}"
             for n in names]
    lines.append("| **mean of sets** | | " + " | ".join(means) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Read the features, report, write results.json and results.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--features", type=Path, default=Path("benchmarks/data/features/dev.jsonl"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/calibration-gain"))
    parser.add_argument("--folds", type=int, default=5, help="conli calibrate's --folds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only-gains", action="store_true",
                        help="use a half's cut only where it beat the shipped decision "
                        "cross-validated")
    args = parser.parse_args(argv)
    meta, rows = read_rows(args.features)
    result = report(rows, args.folds, args.seed, args.only_gains)
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"command": " ".join(["python", SCRIPT, *sys.argv[1:]]),
              "features": str(args.features), "features_commit": meta.get("git_commit"),
              "folds": args.folds, "seed": args.seed, "only_gains": args.only_gains,
              "result": result}
    return publish(args.out, record, markdown(result))


if __name__ == "__main__":
    sys.exit(main())

"""A detect run's verdicts against chain of thought's on the same dev examples, paired.

    python eval/paired_gain.py --predictions eval/results/detect-cot-focus-v3/predictions.jsonl \\
        --features eval/features/dev.jsonl --out eval/results/paired-focus-v3

For a change to the NLI call (e.g. ``CONLI_NLI_EVIDENCE=focus``) run on a subset of the
collected examples: each example the run decided is matched with ``cot``'s verdict recorded
in the features file, and the report gives both balanced accuracies per set, the gain on
the mean of sets with ``train_detector.gain_interval``'s paired bootstrap, how many
decisions flipped each way, and the two views combined (flag when both flag; when either
does). Nothing is fitted, so nothing here is scored on what it was tuned on, except that
choosing between the combinations after reading them is a choice made on these examples.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # train_detector, beside this file

from sklearn.metrics import roc_auc_score

from conli.evaluation.report import write_results
from conli.training.data import ExampleRows, read_rows
from conli.training.train import HeldOut
from train_detector import gain_interval, pct, per_set, signed

Rule = Callable[[bool, bool], bool]  # (cot flagged, the run flagged) -> flagged
RULES: dict[str, Rule] = {"run": lambda cot, run: run, "both flag": lambda cot, run: cot and run,
                          "either flags": lambda cot, run: cot or run}


def run_flags(predictions: Path) -> dict[str, bool]:
    """Each decided example's flag: anything but ``supported`` (unverified counts as a flag)."""
    out = {}
    for line in predictions.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("error") is None and record.get("predicted"):
            out[record["example_id"]] = record["predicted"] != "supported"
    return out


def run_scores(predictions: Path) -> dict[str, float]:
    """Each decided example's response score (its most doubtful sentence's support)."""
    out = {}
    for line in predictions.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("error") is None and record.get("support_score") is not None:
            out[record["example_id"]] = record["support_score"]
    return out


def compare(rows: list[ExampleRows], flags: dict[str, bool],
            scores: dict[str, float] | None = None) -> dict[str, Any]:
    """Per set and on the mean: cot, the run and the combinations, with paired intervals.

    With ``scores``, also how well each ranks the paired examples (pooled AUROC of
    1 - support), for changes that move the score more than the decision.
    """
    common = [r for r in rows if r.example_id in flags]
    by_set = {d: [r for r in common if r.dataset == d] for d in sorted({r.dataset for r in common})}
    report: dict[str, Any] = {"n": len(common), "cot": per_set(common, ExampleRows.cot_flagged)}
    for name, rule in RULES.items():
        def decide(r: ExampleRows, rule: Rule = rule) -> bool:
            return rule(r.cot_flagged(), flags[r.example_id])
        held = [HeldOut(d, 0, None, 0.0, None, None, [], [r.label for r in mine],
                        [decide(r) for r in mine]) for d, mine in by_set.items()]
        report[name] = {"per_set": per_set(common, decide),
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


def markdown(report: dict[str, Any]) -> str:
    """The per-set table and the gains."""
    sets = list(report["sets"])
    lines = [f"| decision | {' | '.join(sets)} | mean | gain over cot [95%] |",
             "|---|" + "---|" * (len(sets) + 2),
             "| n (hallucinated) | " + " | ".join(
                 f"{report['sets'][d]['n']} ({report['sets'][d]['hallucinated']})"
                 for d in sets) + " | | |"]
    rows = {"cot": (report["cot"], None)} | {
        name: (report[name]["per_set"], report[name]["gain_interval"]) for name in RULES}
    for name, (scores, gain) in rows.items():
        cells = " | ".join(pct(scores.get(d)) for d in [*sets, "mean"])
        interval = "" if gain is None else \
            f"{signed(gain[0])} [{signed(gain[1])}, {signed(gain[2])}]"
        lines.append(f"| {name} | {cells} | {interval} |")
    flips = ", ".join(f"{k}: {v}" for k, v in sorted(report["flips"].items()))
    lines += ["", f"{report['n']} paired examples; decisions that changed: {flips}."]
    if "auroc" in report:
        lines.append(f"Pooled AUROC (1 - support): cot {pct(report['auroc']['cot'])}, "
                     f"the run {pct(report['auroc']['run'])}.")
    else:
        lines.append("No pooled AUROC: some paired example has no support score in the run.")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Read a run's predictions and the features file; write results.json and results.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--predictions", type=Path, required=True)
    parser.add_argument("--features", type=Path, default=Path("eval/features/dev.jsonl"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    meta, rows = read_rows(args.features)
    report = compare(rows, run_flags(args.predictions), run_scores(args.predictions))
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"command": " ".join(["python", "eval/paired_gain.py", *sys.argv[1:]]),
              "predictions": str(args.predictions), "features": str(args.features),
              "features_commit": meta.get("git_commit"), "result": report}
    table = markdown(report)
    write_results(args.out, record, table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

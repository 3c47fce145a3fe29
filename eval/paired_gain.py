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


def read_records(predictions: Path, exclude: Path | None = None) -> list[dict[str, Any]]:
    """A run's ``predictions.jsonl``, every example that completed (read once per report).

    ``exclude``: another run's predictions, whose examples are left out (those a rule
    was chosen on, so that the rule is scored on the others).
    """
    def lines(path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    chosen_on = {r["example_id"] for r in lines(exclude)} if exclude else set()
    return [r for r in lines(predictions)
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
    lines = table_head(report, ["mean", "gain over cot [95%]"])
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
    parser.add_argument("--features", type=Path, default=Path("eval/features/dev.jsonl"))
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


def main(argv: list[str] | None = None) -> int:
    """Read a run's predictions and the features file; write results.json and results.md."""
    args = parse_args(__doc__, argv)
    meta, rows = read_rows(args.features)
    records = read_records(args.predictions, args.exclude)
    report = compare(rows, run_flags(records), run_scores(records))
    return finish(args, meta, "eval/paired_gain.py", report, markdown(report))


if __name__ == "__main__":
    sys.exit(main())

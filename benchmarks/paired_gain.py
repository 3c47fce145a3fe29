"""A detect run's verdicts against chain of thought's on the same dev examples, paired.

    python benchmarks/paired_gain.py \\
        --predictions benchmarks/results/detect-cot-focus-v3/predictions.jsonl \\
        --features benchmarks/data/features/dev.jsonl --out benchmarks/results/paired-focus-v3

For a change to the NLI call (e.g. ``CONLI_NLI_EVIDENCE=focus``) run on a subset of the
collected examples: each example the run decided is matched with ``cot``'s verdict recorded
in the features file, and the report gives both balanced accuracies per set, the gain on
the mean of sets with the project's paired bootstrap (``rule.decide``), how many
decisions flipped each way, and the two views combined (flag when both flag; when either
does). Nothing is fitted, so nothing here is scored on what it was tuned on, except that
choosing between the combinations after reading them is a choice made on these examples.
"""

from __future__ import annotations

import sys
from typing import Any

from conli.evaluation.paired import (
    RULES,
    compare,
    finish,
    parse_args,
    pct,
    read_run,
    run_flags,
    run_scores,
    signed,
    table_head,
)
from conli.training.data import read_rows


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


def main(argv: list[str] | None = None) -> int:
    """Read a run's predictions and the features file; write results.json and results.md."""
    args = parse_args(__doc__, argv)
    meta, rows = read_rows(args.features)
    records = read_run(args.predictions, args.exclude)
    report = compare(rows, run_flags(records), run_scores(records))
    return finish(args, meta, "benchmarks/paired_gain.py", report, markdown(report))


if __name__ == "__main__":
    sys.exit(main())

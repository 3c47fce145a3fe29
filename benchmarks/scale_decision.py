"""Issue 44, item 4: does the fitted grounded scale beat the shipped one, by the rule?

    python benchmarks/scale_decision.py --results benchmarks/results/judge-60/results.json \\
        --out benchmarks/results/scale-decision

Stored results only: no model call. ``conli eval judge`` scores every progression text
with the shipped scale (mode ``grounded``) and with a scale fitted leave-one-dataset-out
(each set scored by an isotonic fit on the other sets alone). Both are put to the project's
rule (``conli.evaluation.rule.decide``): AUROC of 6 - score for "the text has a wrong
sentence", paired on the same texts, per progression set and on the mean of sets. The
residuals (mean |score - target|) the results file already holds are shown beside it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from conli.evaluation.rule import Paired, decide

SHIPPED, FITTED = "grounded", "grounded, scale fitted leave-one-dataset-out"


def paired(scores: Sequence[Mapping[str, Any]]) -> dict[str, Paired]:
    """Per set: each text's gold (any wrong sentence) and both scales' 6 - score."""
    by_text: dict[tuple[str, str, str, str, float], dict[str, float]] = {}
    for row in scores:
        if row["mode"] in (SHIPPED, FITTED) and row["score"] is not None:
            key = (row["dataset"], row["item"], row["task"], str(row["pct"]), row["target"])
            by_text.setdefault(key, {})[row["mode"]] = 6.0 - row["score"]
    sets: dict[str, tuple[list[bool], list[float], list[float]]] = {}
    for (dataset, _, _, _, target), both in sorted(by_text.items()):
        if len(both) == 2:
            gold, fitted, shipped = sets.setdefault(dataset, ([], [], []))
            gold.append(target < 5)  # the text holds a wrong sentence
            fitted.append(both[FITTED])
            shipped.append(both[SHIPPED])
    return {name: Paired(*values) for name, values in sets.items()}


def main() -> None:
    """Decide, and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    decision = decide(paired(results["scores"]))
    residuals = results["residuals"]
    keys = ["all", *sorted(k for k in residuals.get(SHIPPED, {}) if k != "all")]
    rows = [f"| {mode} | " + " | ".join(
        f"{residuals[mode][key]['residual']:.2f}" if key in residuals[mode] else "–"
        for key in keys) + " |" for mode in (SHIPPED, FITTED) if mode in residuals]
    provenance = results.get("provenance", {})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(
        {"results": str(args.results), "documents": results["progress"],
         "decision": decision.as_dict()}, indent=2) + "\n")
    (args.out / "results.md").write_text(
        "# The grounded judge's scale: fitted (leave-one-dataset-out) against shipped\n\n"
        f"- from `{args.results}` ({results['progress']['documents_done']} documents; "
        f"written at `{provenance.get('git_commit', '?')}`), no model call\n"
        f"- command: `python benchmarks/scale_decision.py --results {args.results} "
        f"--out {args.out}`\n\n"
        "AUROC of 6 - score for a text with a wrong sentence, paired on the same texts:\n\n"
        f"{decision.table('fitted', 'shipped')}\n\n"
        "Residual (mean |score - target|, single tasks; lower is better):\n\n"
        f"| scale | {' | '.join(keys)} |\n|---|{'---|' * len(keys)}\n" + "\n".join(rows) + "\n")
    print((args.out / "results.md").read_text())


if __name__ == "__main__":
    main()

"""Where chain of thought goes wrong on the dev examples: misses or false alarms, short or long.

    python benchmarks/experiments/issue-28-detector-training/cot_errors.py \\
        --predictions benchmarks/results/detect-fused-v3/predictions.jsonl

Reads a ``fused`` collection (each sentence's ``nli_flagged`` feature is cot's own flag) and
counts, per set, hallucinated responses cot passed (misses) and faithful ones it flagged
(false alarms), with the length of each response's longest sentence. It decides which
lever is worth a model run: splitting long compound sentences into claims can only help
where misses are long sentences, and adds chances to flag a faithful one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from conli.evaluation.detection import read_predictions

LONG = 25  # words: a sentence this long usually joins two or more claims


def outcomes(predictions: Path) -> list[dict[str, Any]]:
    """Per decided example: set, gold label, cot's flag and its longest sentence in words."""
    found = []
    for record in read_predictions(predictions):
        result = record.get("result")
        if record.get("error") is not None or not result:
            continue
        checked = [s for s in result["sentences"] if s["checked"]]
        flags = [j["features"]["nli_flagged"] > 0.5 for s in checked for j in s["judgements"]
                 if "nli_flagged" in j.get("features", {})]
        if not checked or len(flags) != len(checked):
            continue
        found.append({"dataset": record["dataset"], "gold": bool(record["gold"]),
                      "flagged": any(flags),
                      "words": max(len(s["text"].split()) for s in checked)})
    return found


def table(rows: list[dict[str, Any]]) -> str:
    """Misses and false alarms per set, then their sentence lengths pooled."""
    by_set: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_set[row["dataset"]].append(row)
    lines = ["| set | hallucinated | missed | faithful | false alarms |", "|---|---|---|---|---|"]
    for name, mine in sorted(by_set.items()):
        bad = [r for r in mine if r["gold"]]
        good = [r for r in mine if not r["gold"]]
        lines.append(f"| {name} | {len(bad)} | {sum(not r['flagged'] for r in bad)} | "
                     f"{len(good)} | {sum(r['flagged'] for r in good)} |")
    lines += ["", f"| outcome | n | median longest sentence (words) | over {LONG} words |",
              "|---|---|---|---|"]
    kinds = {"missed": lambda r: r["gold"] and not r["flagged"],
             "caught": lambda r: r["gold"] and r["flagged"],
             "false alarm": lambda r: not r["gold"] and r["flagged"],
             "rightly passed": lambda r: not r["gold"] and not r["flagged"]}
    for name, keep in kinds.items():
        words = [r["words"] for r in rows if keep(r)]
        if words:
            lines.append(f"| {name} | {len(words)} | {statistics.median(words):g} | "
                         f"{sum(w > LONG for w in words)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the tables for one collection's predictions."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--predictions", type=Path, required=True)
    args = parser.parse_args(argv)
    sys.stdout.write(table(outcomes(args.predictions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

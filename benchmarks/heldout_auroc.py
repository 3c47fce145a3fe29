"""Detect runs side by side on the examples they share: AUROC per set, and seconds.

    python benchmarks/heldout_auroc.py --run benchmarks/results/detect-minicheck-local-heldout \\
        --run benchmarks/results/detect-fused-v3 --out benchmarks/results/checker-heldout

No model call. For each run, on the examples every run predicted: per set, the AUROC of
``1 - support_score`` for a hallucinated response (sklearn's ``roc_auc_score``; a response
with no score counts as 0.5), and the mean wall seconds a check took (``timings.total``,
read only against runs made in the same session: machines and load differ). Balanced
accuracy, paired, is ``eval/paired_runs.py``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from statistics import mean
from typing import Any


def predictions(run: Path) -> dict[str, dict[str, Any]]:
    """The run's predictions by example id (the last line for an id wins)."""
    lines = (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return {row["example_id"]: row for row in map(json.loads, filter(str.strip, lines))}


def table(runs: Mapping[str, dict[str, dict[str, Any]]]) -> tuple[dict[str, Any], str]:
    """Per set and run: n, AUROC and mean seconds, on the shared examples; and the markdown."""
    from sklearn.metrics import roc_auc_score

    shared = sorted(set.intersection(*(set(rows) for rows in runs.values())))
    first = next(iter(runs.values()))
    sets = sorted({first[i]["dataset"] for i in shared})
    out: dict[str, Any] = {}
    for name in sets:
        ids = [i for i in shared if first[i]["dataset"] == name]
        gold = [bool(first[i]["gold"]) for i in ids]
        out[name] = {"n": len(ids), "hallucinated": sum(gold)}
        for run, rows in runs.items():
            risk = [1 - (rows[i]["support_score"] if rows[i]["support_score"] is not None
                         else 0.5) for i in ids]
            seconds = [((rows[i].get("result") or {}).get("timings") or {}).get("total")
                       for i in ids]
            out[name][run] = {
                "auroc": 100 * roc_auc_score(gold, risk) if 0 < sum(gold) < len(gold) else None,
                "seconds": mean(s for s in seconds if s is not None) if any(seconds) else None}
    head = "| set | n (hallucinated) | " + " | ".join(f"{r} AUROC | s" for r in runs) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(runs))]
    for name in sets:
        cells = [name, f"{out[name]['n']} ({out[name]['hallucinated']})"]
        for run in runs:
            got = out[name][run]
            cells += ["–" if got["auroc"] is None else f"{got['auroc']:.1f}",
                      "–" if got["seconds"] is None else f"{got['seconds']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    means = ["mean of sets", ""]
    for run in runs:
        values = [out[n][run]["auroc"] for n in sets if out[n][run]["auroc"] is not None]
        means += [f"{mean(values):.1f}" if values else "–", ""]
    lines.append("| " + " | ".join(means) + " |")
    return out, "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, action="append", required=True,
                        help="a `conli eval detect` result folder (repeatable)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    runs = {run.name: predictions(run) for run in args.run}
    figures, markdown = table(runs)
    command = " ".join(["python", "benchmarks/heldout_auroc.py",
                        *(sys.argv[1:] if argv is None else argv)])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(
        {"command": command, "sets": figures}, indent=2) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(f"- command: `{command}`\n\n{markdown}",
                                         encoding="utf-8")
    sys.stdout.write(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Two `conli eval rewrite` runs on the same examples, put to the project's rule (paired means).

    python benchmarks/paired_rewrites.py --candidate benchmarks/results/rewrite-layout-shared \\
        --current benchmarks/results/rewrite-layout-own \\
        --out benchmarks/results/paired-rewrite-layout

Reads each run's ``rewrites.jsonl`` (one row an example) and pairs the examples both runs
rewrote, per set. Three qualities, each by the rule's paired bootstrap on the mean of sets
(``conli.evaluation.rule.decide``, metric ``mean``): ``clean`` (the refined text re-detects
as supported or was emptied), ``judge`` (the refined text's 1-5 score, scaled to 0-1, an
unscored text counting 0) and ``kept`` (ROUGE-L of the refined text against the raw one:
how little the rewrite changed). Nothing is fitted.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conli.evaluation.report import write_results
from conli.evaluation.rule import Paired, decide

Row = dict[str, Any]
QUALITIES: dict[str, Callable[[Row], float]] = {
    "clean": lambda row: 1.0 if row["clean"] else 0.0,
    "judge": lambda row: (row["judge_refined"] - 1) / 4 if row["judge_refined"] else 0.0,
    "kept": lambda row: float(row["rouge_l_vs_raw"]),
}


def rows(run: Path) -> dict[tuple[str, str], Row]:
    """A run's rows by (set, example id)."""
    lines = (run / "rewrites.jsonl").read_text(encoding="utf-8").splitlines()
    return {(row["dataset"], row["example_id"]): row for row in map(json.loads, lines)}


def paired(candidate: dict[tuple[str, str], Row], current: dict[tuple[str, str], Row],
           quality: Callable[[Row], float]) -> dict[str, Paired]:
    """Each set's examples both runs hold, as the rule's paired values."""
    both = sorted(set(candidate) & set(current))
    out: dict[str, Paired] = {}
    for dataset in sorted({key[0] for key in both}):
        keys = [key for key in both if key[0] == dataset]
        out[dataset] = Paired(gold=[bool(current[k]["label"]) for k in keys],
                              candidate=[quality(candidate[k]) for k in keys],
                              current=[quality(current[k]) for k in keys])
    return out


def main() -> None:
    """Pair the runs, decide each quality, write the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--current", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    candidate, current = rows(args.candidate), rows(args.current)
    decisions = {name: decide(paired(candidate, current, quality), "mean")
                 for name, quality in QUALITIES.items()}
    differ = sum(1 for key in set(candidate) & set(current)
                 if candidate[key]["refined"] != current[key]["refined"])
    markdown = "\n\n".join(
        [f"# {args.candidate.name} against {args.current.name}",
         f"Refined texts that differ: {differ}"]
        + [f"## {name}\n\n" + d.table(args.candidate.name, args.current.name)
           for name, d in decisions.items()])
    payload = {"kind": "paired-rewrites", "candidate": str(args.candidate),
               "current": str(args.current), "refined texts that differ": differ,
               "decisions": {name: d.as_dict() for name, d in decisions.items()}}
    write_results(args.out, payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()

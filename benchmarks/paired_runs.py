"""Two `conli eval detect` runs on the same examples, put to the project's rule (BAcc).

    python benchmarks/paired_runs.py --candidate benchmarks/results/detect-cot-rejudge \\
        --current benchmarks/results/detect-cot-record --out benchmarks/results/paired-rejudge

Each run's response verdicts on the examples both predicted, per set; an ``unverified``
response is scored as the wrong class, as ``conli eval`` scores it. The rule
(``conli.evaluation.rule.decide``, metric BAcc, paired bootstrap) gives the gain per set and
on the mean of sets. Nothing is fitted.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from conli.evaluation.detection import read_predictions
from conli.evaluation.rule import Paired, decide


def predictions(run: Path) -> dict[str, dict[str, Any]]:
    """The run's predictions by example id (the last line for an id wins)."""
    return {row["example_id"]: row for row in read_predictions(run)}


def flag(row: dict[str, Any]) -> float:
    """1 = flagged hallucinated; an unverified answer counts as the wrong class."""
    if row["predicted"] == "unverified" or row.get("error"):
        return 0.0 if row["gold"] else 1.0
    return 1.0 if row["predicted"] == "hallucinated" else 0.0


def main() -> None:
    """Pair the runs, decide, write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--current", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    new, old = predictions(args.candidate), predictions(args.current)
    sets: dict[str, tuple[list[bool], list[float], list[float]]] = {}
    changed: Counter[str] = Counter()
    for key in sorted(new.keys() & old.keys()):
        a, b = new[key], old[key]
        gold, cand, cur = sets.setdefault(a["dataset"], ([], [], []))
        gold.append(bool(a["gold"]))
        cand.append(flag(a))
        cur.append(flag(b))
        if a["predicted"] != b["predicted"]:
            changed[f"{b['predicted']} -> {a['predicted']} (gold "
                    f"{'hallucinated' if a['gold'] else 'faithful'})"] += 1
    decision = decide({k: Paired(*v) for k, v in sets.items()}, metric="bacc")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(
        {"candidate": str(args.candidate), "current": str(args.current),
         "examples": sum(len(v[0]) for v in sets.values()), "changed": dict(changed),
         "decision": decision.as_dict()}, indent=2) + "\n")
    lines = [f"- {what}: {n}" for what, n in changed.most_common()] or ["- none"]
    (args.out / "results.md").write_text(
        f"# {args.candidate.name} against {args.current.name}, paired (BAcc)\n\n"
        f"- command: `python benchmarks/paired_runs.py --candidate {args.candidate} --current "
        f"{args.current} --out {args.out}`\n\n"
        f"{decision.table(args.candidate.name, args.current.name)}\n\n"
        "Responses whose verdict changed:\n\n" + "\n".join(lines) + "\n")
    print((args.out / "results.md").read_text())


if __name__ == "__main__":
    main()

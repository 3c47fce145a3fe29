"""Two fused artifacts on the same stored features: per-set BAcc and the decisions that differ.

    python benchmarks/compare_artifacts.py --old src/conli/signals/fused.v1.json \\
        --new benchmarks/results/fused-rebuild/fused.v2.json \\
        --features benchmarks/data/features/dev.jsonl

For a rebuilt artifact: how far its decisions are from the one it replaces, on every dev
example (both are scored on rows most of which one of them was trained on, so this says
how alike they are, not how good either is).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conli.evaluation.paired import pct, per_set
from conli.signals.model import SignalModel, load_model
from conli.training.data import ExampleRows, read_rows
from conli.training.train import response_score


def decide(model: SignalModel, rows: list[ExampleRows]) -> dict[str, bool]:
    """Each example's flag under ``model``."""
    return {r.example_id: response_score(model, r) >= model.threshold for r in rows}


def table(old: SignalModel, new: SignalModel, rows: list[ExampleRows]) -> str:
    """Per-set BAcc of both, then every example whose decision differs."""
    a, b = decide(old, rows), decide(new, rows)
    by_old = per_set(rows, lambda r: a[r.example_id])
    by_new = per_set(rows, lambda r: b[r.example_id])
    lines = [f"| set | {old.version} | {new.version} |", "|---|---|---|"]
    lines += [f"| {d} | {pct(by_old[d])} | {pct(by_new[d])} |" for d in by_old]
    differ = [r for r in rows if a[r.example_id] != b[r.example_id]]
    lines += ["", f"{len(differ)} of {len(rows)} decisions differ:"]
    lines += [f"- {r.example_id} ({'hallucinated' if r.label else 'faithful'}): "
              f"{'flagged' if a[r.example_id] else 'passed'} by {old.version}, "
              f"{'flagged' if b[r.example_id] else 'passed'} by {new.version}" for r in differ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, required=True)
    parser.add_argument("--features", type=Path, default=Path("benchmarks/data/features/dev.jsonl"))
    args = parser.parse_args(argv)
    _, rows = read_rows(args.features)
    sys.stdout.write(table(load_model(args.old), load_model(args.new), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

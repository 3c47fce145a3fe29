"""Issue 51: does the withholding of text addressed to the checker touch the dev sets?

    python benchmarks/experiments/issue-51-defences/addressing_dev.py \\
        --data-dir ../shared/data --out benchmarks/results/addressing-dev

No model call. Every source, response and question of every dev set is searched with
``conli.text.addressing.addressed`` (the spans ``render`` withholds and the ``ground`` node
names, and the sentences ``merge`` flags). Where nothing matches, every prompt, reading and
verdict of a check is what it was before the defence, so its paired accuracy change on
those examples is exactly zero; any match is listed for a look.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from conli.evaluation.loaders import DATASETS, load_dataset
from conli.evaluation.report import git_state, write_results
from conli.text.addressing import DEFUSED_KINDS, addressed

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout

FIELDS = ("source", "response", "question")


def scan(data_dir: Path) -> dict[str, Any]:
    """Per set: examples, and per field the examples with a withheld span (and the spans)."""
    sets: dict[str, Any] = {}
    for name in DATASETS:
        counts: Counter[str] = Counter()
        found = []
        for example in load_dataset(name, data_dir):
            counts["examples"] += 1
            for field in FIELDS:
                text = getattr(example, field, None) or ""
                spans = [a for a in addressed(text) if a.kind not in DEFUSED_KINDS]
                if spans:
                    counts[field] += 1
                    found += [{"id": example.id, "field": field, "kind": a.kind,
                               "text": a.text[:200]} for a in spans]
        sets[name] = {"counts": dict(counts), "found": found}
    return sets


def markdown(result: dict[str, Any]) -> str:
    """The table: examples and matches by set and field."""
    lines = ["# Text addressed to the checker in the dev sets (issue 51)", "",
             f"- command: `{result['command']}`", f"- commit: `{result['commit']}`", "",
             "| set | examples | sources matched | responses matched | questions matched |",
             "|---|---|---|---|---|"]
    for name, mine in result["sets"].items():
        c = mine["counts"]
        lines.append(f"| {name} | {c.get('examples', 0)} | {c.get('source', 0)} | "
                     f"{c.get('response', 0)} | {c.get('question', 0)} |")
    found = [f for mine in result["sets"].values() for f in mine["found"]]
    lines += ["", f"Spans withheld in all: {len(found)}."]
    lines += [f"- {f['id']} ({f['field']}, {f['kind']}): {f['text']!r}" for f in found[:50]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    commit, dirty = git_state()
    result = {"command": " ".join(["python", SCRIPT,
                                   *(sys.argv[1:] if argv is None else argv)]),
              "commit": f"{commit}{'+dirty' if dirty else ''}", "sets": scan(args.data_dir)}
    table = markdown(result)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(args.out, result, table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

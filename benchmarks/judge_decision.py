"""The judge_mode decision by the project's rule, from the stored held-out judge samples.

    python benchmarks/judge_decision.py --out benchmarks/results/judge-decision

Reads the paired per-example scores of ``conli eval judge-auroc`` runs on examples the
shipped fused classifier never saw (six sets at 63 examples, the two HaluEval sets at 20)
and applies ``conli.evaluation.rule.decide``: the paired gain of grounded over rubric on the
mean of the sets, with its 95% bootstrap interval, and each set's. No model call.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from conli.evaluation.report import git_state
from conli.evaluation.rule import Paired, decide
from conli.files import write_atomically

ROOT = Path(__file__).resolve().parents[1]
NAMES = {"aggrefact_cnndm": "AggreFact-CNN", "aggrefact_xsum": "AggreFact-XSum",
         "conli_qags_cnndm": "QAGS-CNN", "conli_qags_xsum": "QAGS-XSum",
         "conli_summeval": "SummEval", "factcc": "FactCC", "halueval_qa": "HaluEval QA",
         "halueval_summarization": "HaluEval summarization"}
# (results folder, the sets taken from it): the held-out runs docs/benchmarks.md names
RUNS = [("judge-auroc-unseen-63-close", None), ("judge-auroc-unseen-63", None),
        ("judge-auroc-unseen", {"halueval_qa", "halueval_summarization"})]


def paired_sets(results: Path) -> dict[str, Paired]:
    """Each set's examples scored by both judges: gold, 6 - grounded, 6 - rubric."""
    sets: dict[str, Paired] = {}
    for folder, only in RUNS:
        stored = json.loads((results / folder / "results.json").read_text(encoding="utf-8"))
        for dataset, found in stored["datasets"].items():
            if only is not None and dataset not in only:
                continue
            rows = [r for r in found["sample"] if r["rubric"] is not None
                    and r["grounded"] is not None]
            sets[NAMES[dataset]] = Paired([r["gold"] for r in rows],
                                          [6 - r["grounded"] for r in rows],
                                          [6 - r["rubric"] for r in rows])
    return sets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "judge-decision")
    args = parser.parse_args()
    decision = decide(paired_sets(args.results), "auroc")
    table = decision.table("grounded", "rubric")
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"decision": decision.as_dict(), "runs": [r for r, _ in RUNS],
               "command": "python benchmarks/judge_decision.py",
               "git_commit": git_state()[0], "git_dirty": git_state()[1]}
    write_atomically(args.out / "results.json", json.dumps(payload, indent=2) + "\n")
    write_atomically(args.out / "results.md", table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

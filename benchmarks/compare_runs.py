"""Compare two `conli eval detect` runs on the examples both have predicted.

    python benchmarks/compare_runs.py benchmarks/results/detect-hierarchical \
        benchmarks/results/detect-hierarchical-score-first

Prints response-level F1-macro, BAcc and unverified per run over the shared examples (all
datasets pooled, and per dataset), plus model time per example: how accuracy moves when
a mode is switched, measured on the same inputs, and for two runs the paired count of
verdicts one got right and the other wrong. For each run it also prints the
sentence-level-only reading of the same predictions (flags raised at the entity level
dropped), which is exactly the `sentence` ablation: its calls are the same calls.

``--after N`` scores only the examples past the first N of the first run's log (runs keep
the seeded order), e.g. the ones nobody had looked at when a mode was chosen.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from conli.evaluation.detection import read_predictions
from conli.evaluation.metrics import detection_report
from conli.gate import response_verdict


def load(run: Path, after: int = 0) -> dict[tuple[str, str], dict]:  # type: ignore[type-arg]
    rows = read_predictions(run)
    return {(r["dataset"], r["example_id"]): r for r in rows[after:]}


def sentence_only(row: dict) -> str:  # type: ignore[type-arg]
    """The response verdict from the sentence-level judgements alone."""
    if row.get("result") is None:
        return str(row["predicted"])
    verdicts = [j["verdict"] for s in row["result"]["sentences"] if s["checked"]
                for j in s["judgements"] if j["level"] == "sentence"]
    return response_verdict(verdicts)


def line(name: str, rows: list[dict], *, sentences_only: bool = False) -> str:  # type: ignore[type-arg]
    predicted = [sentence_only(r) if sentences_only else r["predicted"] for r in rows]
    report = detection_report([r["gold"] for r in rows], predicted)  # type: ignore[arg-type]
    seconds = [r["result"]["usage"]["seconds"] for r in rows if r.get("result")]
    generated = [r["result"]["usage"]["completion_tokens"] for r in rows if r.get("result")]
    text = (f"{name:55s} n={len(rows):3d} F1-macro {100 * report['f1_macro']:5.1f} "
            f"BAcc {100 * report['balanced_accuracy']:5.1f} unverified {report['unverified']:2d}")
    if sentences_only:  # the calls were the hierarchical run's: its time says nothing here
        return text
    return (f"{text} model s/example {sum(seconds) / max(1, len(seconds)):5.1f} "
            f"generated/example {sum(generated) / max(1, len(generated)):5.1f}")


def paired(first: dict, second: dict, shared: list) -> str:  # type: ignore[type-arg]
    """How many response verdicts each run got right where the other got wrong."""
    def right(row: dict) -> bool:  # type: ignore[type-arg]
        return (row["predicted"] == "hallucinated") == bool(row["gold"])

    gains = sum(right(second[k]) and not right(first[k]) for k in shared)
    losses = sum(right(first[k]) and not right(second[k]) for k in shared)
    return f"paired: second run right where the first was wrong {gains}, the reverse {losses}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--after", type=int, default=0,
                        help="skip the first N examples of the first run's log")
    args = parser.parse_args()
    runs: list[Path] = args.runs
    loaded = [load(run, args.after if i == 0 else 0) for i, run in enumerate(runs)]
    shared = sorted(set.intersection(*(set(d) for d in loaded)))
    datasets = sorted({d for d, _ in shared})
    for run, data in zip(runs, loaded, strict=True):
        for only in (False, True):
            label = f"{run.name}{' [sentence-level flags only]' if only else ''}"
            print(line(f"{label} (all)", [data[k] for k in shared], sentences_only=only))
            for name in datasets:
                print(line(f"  {name}", [data[k] for k in shared if k[0] == name],
                           sentences_only=only))
    if len(loaded) == 2:
        print(paired(loaded[0], loaded[1], shared))


if __name__ == "__main__":
    main()

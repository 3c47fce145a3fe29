"""Issue 56.2: fused's reading through the prompt cache, collected on the dev examples and decided.

    # 1. the reading through the cache (signals_read.v2) of each stored example's sentences:
    #    journaled, resumable, the examples fused.v1 never saw first (run order)
    python benchmarks/experiments/issue-56-prompt-cache/reading_cache.py \\
        collect --out benchmarks/results/reading-cache --budget-minutes 90
    # 2. fused.v1 (and signals.v1) on that reading against what ships, paired, no model call
    python benchmarks/experiments/issue-56-prompt-cache/reading_cache.py \\
        decide --out benchmarks/results/reading-cache

The NLI half of fused's features is the stored run's (``benchmarks/data/features/dev.jsonl``, the
v3 collection); only what the reading computes (``READ_KEYS``) is replaced. A refit on
the new reading is scored leave-one-dataset-out on the collected rows, all of which
``fused.v1`` never saw, so every figure here is held out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

from conli.agents.nli_prompts import opening_as_nli
from conli.backends.base import Backend
from conli.config import Settings
from conli.evaluation.detection import Outcome, read_predictions, run_order, stratified_sample
from conli.evaluation.loaders import DATASETS, load_dataset
from conli.evaluation.paired import trained_on
from conli.evaluation.report import publish
from conli.evaluation.rule import Decision, Paired, decide
from conli.signals.features import sentence_signals
from conli.signals.lexical import SourceWords
from conli.signals.model import ARTIFACT, FUSED_ARTIFACT, SignalModel, load_model
from conli.signals.reader import CACHED_TEMPLATE, read
from conli.text.segment import Segment
from conli.training.data import ExampleRows, read_rows
from conli.training.train import FUSED_FEATURES, FUSED_KEEP, leave_one_dataset_out, response_score

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout

READ_KEYS = ("lp_mean", "lp_min", "lp_low", "pmi_mean", "pmi_min", "pmi_low", "log_tokens")
JOURNAL = "readings.jsonl"
STORED_RUN = Path("benchmarks/results/detect-fused-v3/predictions.jsonl")
FEATURES = Path("benchmarks/data/features/dev.jsonl")


def collection_order(data_dir: Path) -> list[Any]:
    """The v3 collection's examples in run order, those fused.v1 never saw first."""
    sets = [stratified_sample(load_dataset(name, data_dir), 100, 0) for name in DATASETS]
    order = run_order(sets, 0)
    seen = trained_on(load_model(FUSED_ARTIFACT), data_dir)
    return [e for e in order if e.id not in seen] + [e for e in order if e.id in seen]


def stored_segments(predictions: Path) -> dict[str, list[Segment]]:
    """Each stored example's sentences, as the stored run cut them."""
    out = {}
    for outcome in read_predictions(predictions, Outcome.from_json):
        if outcome.result is not None:
            out[outcome.example_id] = [Segment(s.index, s.text, s.start, s.end, s.checked)
                                       for s in outcome.result.sentences]
    return out


def collect(args: argparse.Namespace) -> int:
    """Read each example through the cache, one journal line each; resume from the journal."""
    from conli.backends.local import LocalBackend

    args.out.mkdir(parents=True, exist_ok=True)
    journal = args.out / JOURNAL
    done = {json.loads(line)["id"] for line in journal.open(encoding="utf-8")} \
        if journal.is_file() else set()
    segments = stored_segments(args.predictions)
    settings = Settings()
    backend: Backend = LocalBackend(settings)
    opening = opening_as_nli(CACHED_TEMPLATE, settings, backend.capabilities)
    deadline = time.monotonic() + 60 * args.budget_minutes if args.budget_minutes else None
    made = 0
    with journal.open("a", encoding="utf-8") as log:
        for example in collection_order(args.data_dir):
            if example.id in done or example.id not in segments:
                continue
            if deadline is not None and time.monotonic() > deadline:
                break
            started = time.perf_counter()
            cut = segments[example.id]
            reading = read(backend, example.source, example.response, cut,
                           question=example.question, opening=opening)
            signals = sentence_signals(reading.arrays, cut, SourceWords.of(example.source), {})
            log.write(json.dumps({
                "id": example.id, "dataset": example.dataset,
                "sentences": {str(i): {k: s.values[k] for k in READ_KEYS}
                              for i, s in signals.items()},
                "seconds": round(time.perf_counter() - started, 2),
                "prompt_tokens": sum(c.usage.prompt_tokens for c in reading.calls),
                "cached_tokens": sum(c.usage.cached_tokens for c in reading.calls),
                "template": reading.template}) + "\n")
            log.flush()
            made += 1
            print(f"{len(done) + made} {example.id} {time.perf_counter() - started:.1f}s",
                  file=sys.stderr, flush=True)
    backend.close()
    return 0


def with_reading(rows: list[ExampleRows], journal: list[dict[str, Any]]
                 ) -> tuple[list[ExampleRows], list[ExampleRows]]:
    """The stored rows read through the cache (``journal``'s records), and the same as they are."""
    read_back = {record["id"]: record["sentences"] for record in journal}
    stored, cached = [], []
    for row in rows:
        found = read_back.get(row.example_id)
        if found is None or any(str(s.index) not in found for s in row.sentences):
            continue
        stored.append(row)
        cached.append(replace(row, sentences=[
            replace(s, values={**s.values, **found[str(s.index)]}) for s in row.sentences]))
    return stored, cached


def flags(model: SignalModel, rows: list[ExampleRows]) -> dict[str, float]:
    """Each response's decision under ``model``: 1.0 flagged."""
    return {r.example_id: float(response_score(model, r) >= model.threshold) for r in rows}


def paired(rows: list[ExampleRows], candidate: dict[str, float],
           current: dict[str, float]) -> Decision:
    """The rule's paired bootstrap, per set and on the mean of sets (balanced accuracy)."""
    sets = {d: Paired([r.label for r in mine], [candidate[r.example_id] for r in mine],
                      [current[r.example_id] for r in mine])
            for d in sorted({r.dataset for r in rows})
            for mine in [[r for r in rows if r.dataset == d]]}
    return decide(sets, "bacc")


def refit_flags(rows: list[ExampleRows]) -> dict[str, float]:
    """Fused's feature set refitted on seven sets' rows, deciding the eighth's."""
    held = leave_one_dataset_out(rows, features=FUSED_FEATURES, version="fused.cache",
                                 keep=FUSED_KEEP)
    mine = {d: [r for r in rows if r.dataset == d] for d in {r.dataset for r in rows}}
    return {r.example_id: float(p) for h in held
            for r, p in zip(mine[h.dataset], h.predicted, strict=True)}


def decide_reading(args: argparse.Namespace) -> int:
    """The reading through the cache against what ships, on the examples both read."""
    warnings.filterwarnings("ignore", message="y_pred contains classes not in y_true")
    _, rows = read_rows(args.features)
    journal = [json.loads(line) for line in (args.out / JOURNAL).open(encoding="utf-8")]
    stored, cached = with_reading(rows, journal)
    fused, fast = load_model(FUSED_ARTIFACT), load_model(ARTIFACT)
    shipped = flags(fused, stored)
    comparisons = {
        "fused.v1, reading through the cache": paired(stored, flags(fused, cached), shipped),
        "fused refit on the cached reading (LODO)": paired(stored, refit_flags(cached), shipped),
        "fused refit on the stored reading (LODO)": paired(stored, refit_flags(stored), shipped),
        "fast (signals.v1), reading through the cache": paired(
            stored, flags(fast, cached), flags(fast, stored)),
    }
    pmi = [(a.values["pmi_low"], b.values["pmi_low"])
           for r, c in zip(stored, cached, strict=True)
           for a, b in zip(r.sentences, c.sentences, strict=True)]
    report = {
        "n": len(stored), "sets": {d: sum(r.dataset == d for r in stored)
                                   for d in sorted({r.dataset for r in stored})},
        "pmi_low_correlation": statistics.correlation([a for a, _ in pmi], [b for _, b in pmi]),
        "pmi_low_mean": {"stored": statistics.mean(a for a, _ in pmi),
                         "cached": statistics.mean(b for _, b in pmi)},
        "seconds_per_example": statistics.mean(record["seconds"] for record in journal),
        "comparisons": {name: _public(d) for name, d in comparisons.items()},
    }
    record = {"command": " ".join(["python", SCRIPT, *sys.argv[1:]]),
              "features": str(args.features), "result": report}
    return publish(args.out, record, markdown(report))


def _public(d: Decision) -> dict[str, Any]:
    return {"current": d.current, "candidate": d.candidate, "n": d.n,
            "mean": [d.mean.point, d.mean.low, d.mean.high],
            "per_set": {k: [g.point, g.low, g.high] for k, g in d.per_set.items()},
            "losses": d.losses, "ships_for_speed": d.holds}


def markdown(report: dict[str, Any]) -> str:
    """The comparisons as one table: BAcc now and with the change, the gain and its interval."""
    sets = list(report["sets"])
    lines = [f"n = {report['n']} ({', '.join(f'{d} {n}' for d, n in report['sets'].items())}); "
             f"pmi_low, stored against cached reading: r = {report['pmi_low_correlation']:.3f}, "
             f"means {report['pmi_low_mean']['stored']:.3f} / "
             f"{report['pmi_low_mean']['cached']:.3f}; "
             f"{report['seconds_per_example']:.1f} s an example to collect\n",
             "| change | " + " | ".join(sets) + " | mean (now -> with it) | gain [95%] "
             "| ships (speed rule) |",
             "|---" * (len(sets) + 4) + "|"]
    for name, c in report["comparisons"].items():
        cells = [f"{100 * c['current'][d]:.1f} -> {100 * c['candidate'][d]:.1f}"
                 if d in c["current"] else "one label" for d in sets]
        mean_now = statistics.mean(c["current"].values())
        mean_new = statistics.mean(c["candidate"].values())
        point, low, high = (100 * v for v in c["mean"])
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {100 * mean_now:.1f} -> {100 * mean_new:.1f} "
                     f"| {point:+.1f} [{low:+.1f}, {high:+.1f}] "
                     f"| {'yes' if c['ships_for_speed'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``collect`` (the model) or ``decide`` (no model call)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    gather = steps.add_parser("collect", help="the cached reading of each stored example")
    gather.add_argument("--out", type=Path, required=True)
    gather.add_argument("--predictions", type=Path, default=STORED_RUN)
    gather.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    gather.add_argument("--budget-minutes", type=float, default=None)
    judge = steps.add_parser("decide", help="fused.v1 on the cached reading against what ships")
    judge.add_argument("--out", type=Path, required=True)
    judge.add_argument("--features", type=Path, default=FEATURES)
    args = parser.parse_args(argv)
    return collect(args) if args.step == "collect" else decide_reading(args)


if __name__ == "__main__":
    raise SystemExit(main())

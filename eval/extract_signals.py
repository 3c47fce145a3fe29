"""Read dev examples through the embedded model once and keep the raw signals on disk.

    python eval/extract_signals.py --dataset all --limit 100 --seed 0 --out DIR
    python eval/extract_signals.py --synthetic --limit 100 --seed 0 --out DIR

Each example becomes ``DIR/<key>.npz`` (per-token arrays and hidden states) and a line in
``DIR/index.jsonl`` (segments, probe answers, labels, timings); a re-run skips what is
there. Examples run in the seeded, set-interleaved order of ``conli eval detect``, so a
run cut short is a random subsample of every set. ``--synthetic`` reads the synthetic
errors of ``conli.detectors.synthetic`` instead of the dev examples themselves.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

from conli.backends.local import LocalBackend
from conli.config import Settings
from conli.evaluation.detection import run_order, stratified_sample
from conli.evaluation.loaders import DATASETS, Example, load_dataset
from conli.files import LogAppender, read_log
from conli.nlp import load_pipeline
from conli.segment import select_claims, split_response
from conli.signals.reader import read


def examples(args: argparse.Namespace) -> list[Example]:
    names = list(DATASETS) if "all" in args.dataset else args.dataset
    sets = [stratified_sample(load_dataset(n, args.data_dir), args.limit, args.seed)
            for n in names]
    planned = run_order(sets, args.seed)
    if args.synthetic:
        from conli.training.synthetic import synthetic_examples

        planned = synthetic_examples(planned, load_pipeline(), seed=args.seed,
                                     per_example=args.per_example, per_dataset=args.per_dataset)
    return planned


def key_of(example: Example) -> str:
    return hashlib.sha256(f"{example.dataset}\x00{example.id}".encode()).hexdigest()[:20]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", action="append", default=[])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--per-example", type=int, default=1)
    parser.add_argument("--per-dataset", type=int, help="cap synthetic examples per dataset")
    parser.add_argument("--max", type=int, help="stop after this many new examples")
    parser.add_argument("--no-probe", action="store_true", help="skip the yes/no probes")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.dataset = args.dataset or ["all"]
    args.out.mkdir(parents=True, exist_ok=True)
    done = {r["key"] for r in read_log(args.out / "index.jsonl", lambda r: r)}
    todo = [e for e in examples(args) if key_of(e) not in done]
    print(f"{len(done)} done, {len(todo)} to go", file=sys.stderr)
    nlp = load_pipeline()
    backend = LocalBackend(Settings())
    log = LogAppender(args.out / "index.jsonl")
    try:
        for number, example in enumerate(todo[: args.max], start=1):
            started = time.perf_counter()
            segments = select_claims(split_response(example.response, nlp))
            question = example.question
            reading = read(backend, example.source, example.response, segments,
                           question=question, probe=set() if args.no_probe else None)
            key = key_of(example)
            np.savez(args.out / f"{key}.npz", ids=reading.ids, segment=reading.segment,
                     logp=reading.logp, entropy=reading.entropy,
                     logp_plain=reading.logp_plain, entropy_plain=reading.entropy_plain,
                     kl=reading.kl, hidden=reading.hidden)
            log.write({
                "key": key, "id": example.id, "dataset": example.dataset,
                "label": example.label, "question": question,
                "sentence_labels": example.sentence_labels, "meta": example.meta,
                "segments": [[s.index, s.start, s.end, s.checked, s.text] for s in segments],
                "probe_yes": {str(k): v for k, v in reading.probe_yes.items()},
                "seconds": reading.seconds, "tokens": reading.tokens,
                "wall": time.perf_counter() - started,
            })
            print(f"{number}/{len(todo)} {example.id} {time.perf_counter() - started:.1f}s",
                  file=sys.stderr, flush=True)
    finally:
        log.close()
        backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

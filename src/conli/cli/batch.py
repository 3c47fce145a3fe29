"""``conli batch IN.jsonl OUT.jsonl``: the command over the batch engines (``conli.batch``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from conli.backends import get_backend
from conli.batch.local import ENGINES, run
from conli.batch.records import Summary
from conli.batch.work import check_paths, make_worker
from conli.config import Settings
from conli.errors import ConfigError, InputError, install_hint
from conli.frontdoor import MODES, add_session_flags, session_settings


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``conli batch`` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "batch", help="check a JSONL file of {id, source, response} records, resumably",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("input", help="JSONL input: one {id, source, response} per line (with "
                        "--engine ray also a URI Ray can read, e.g. s3://bucket/in.jsonl)")
    parser.add_argument("output", type=Path, help="JSONL results; appended to, and resumed from")
    parser.add_argument("--mode", choices=MODES, default="rewrite",
                        help="check: detect only; rewrite: detect and rewrite; "
                             "judge: 1-5 score only")
    parser.add_argument("--judge", action="store_true",
                        help="in check/rewrite mode, also score before/after with the rubric judge")
    parser.add_argument("--fix-coverage", action="store_true",
                        help="in rewrite mode, add one checked sentence for each uncovered point "
                             "of a record's points")
    add_session_flags(parser)
    parser.add_argument("--concurrency", type=int,
                        help="records at once; with --engine ray, per actor (default: the "
                             "backend's)")
    parser.add_argument("--stop-after-failures", type=int, metavar="N",
                        help="stop (exit 3) after N records in a row failed on the backend; "
                             "0: never (default 5, or CONLI_BATCH_STOP_AFTER_FAILURES)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--engine", choices=ENGINES, default="local",
                        help="local: threads in this process; ray: an actor pool on Ray "
                             "(the [ray] extra)")
    ray = parser.add_argument_group("--engine ray")
    ray.add_argument("--address", help="Ray cluster to join: auto, HOST:PORT or ray://HOST:PORT "
                                       "(default: start a local Ray on this machine)")
    ray.add_argument("--actors", type=int, help="actors, each holding one backend (default 1)")
    ray.add_argument("--cpus-per-actor", type=float,
                     help="CPUs Ray reserves per actor; the embedded model runs that many "
                          "threads (default 1)")
    parser.set_defaults(handler=run_batch)
    return parser


def run_batch(args: argparse.Namespace) -> int:
    """Run the batch and return its exit code (see the README's table).

    0 every record in OUT ok, 1 some records in OUT failed (this run's or earlier ones),
    3 the backend could not be used, 130 interrupted; a batch that cannot start at all
    raises (2).
    """
    settings = session_settings(args, fix_coverage=True if args.fix_coverage else None,
                                batch_stop_after_failures=args.stop_after_failures)
    if args.concurrency is not None and args.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if args.fix_coverage and args.mode != "rewrite":
        raise InputError("--fix-coverage needs --mode rewrite")
    if args.engine == "ray":
        try:
            from conli.batch.ray_engine import run_batch_ray  # Ray is imported only for this engine
        except ImportError as exc:
            raise ConfigError(f"--engine ray needs Ray: {install_hint('ray')} ({exc})") from exc
        summary = run_batch_ray(args, settings)
    else:
        given = [flag for flag, value in (("--address", args.address), ("--actors", args.actors),
                                          ("--cpus-per-actor", args.cpus_per_actor)) if value]
        if given:
            raise InputError(f"{', '.join(given)} needs --engine ray")
        summary = _run_local(args, settings)
    print(summary.format(), file=sys.stderr)
    return summary.exit_code


def _run_local(args: argparse.Namespace, settings: Settings) -> Summary:
    in_path = Path(args.input)
    check_paths(in_path, args.output)
    # Records run ``limit`` at a time; each backend itself caps its calls in flight (the
    # local model's lock, the hosted backends' shared limiter).
    backend = get_backend(settings.llm, settings)
    limit = args.concurrency or settings.batch_concurrency or backend.capabilities.max_concurrency
    try:
        work = make_worker(settings, args.mode, backend, with_judge=args.judge)
        return run(in_path, args.output, work, concurrency=limit, progress=not args.no_progress,
                   stop_after=settings.batch_stop_after_failures)
    finally:
        backend.close()

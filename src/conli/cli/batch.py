"""``conli batch IN.jsonl OUT.jsonl``: the command over the batch engines (``conli.batch``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from conli.backends import get_backend
from conli.batch.ci import (
    SHOWN,
    Figures,
    JUnitSuite,
    append_step_summary,
    github_annotations,
    step_summary,
)
from conli.batch.local import ENGINES, run
from conli.batch.records import out_records
from conli.batch.summary import Summary
from conli.batch.tables import INPUT_FORMATS, input_format, needs_staging, staged
from conli.batch.work import check_paths, make_worker
from conli.cli.display import inline
from conli.cli.flags import (
    add_cache_flag,
    add_fail_on_flag,
    add_judge_mode_flag,
    add_session_flags,
    add_threshold_flag,
    session_settings,
)
from conli.config import Settings
from conli.errors import EXIT_GATE_FAILED, ConfigError, InputError, install_hint
from conli.files import ensure_creatable, write_atomically
from conli.gate import FAIL_ON_TESTS, NO_LOGPROBS
from conli.run.doors import MODES


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``conli batch`` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "batch", help="check a JSONL, CSV or Parquet file of records, resumably")
    parser.add_argument("input", help="IN: JSONL (one {id, source, response} a line), CSV or "
                        "Parquet (a row a record), by its suffix or --input-format; - reads "
                        "stdin. Columns may use RAGAS' or DeepEval's names (user_input, "
                        "retrieved_contexts, actual_output, ...). With --engine ray a JSONL "
                        "IN may be a URI Ray can read, e.g. s3://bucket/in.jsonl")
    parser.add_argument("output", type=Path, help="JSONL results; appended to, and resumed from "
                        "(written in one --mode)")
    parser.add_argument("--input-format", choices=INPUT_FORMATS,
                        help="IN's format when its suffix does not say (e.g. - for stdin); "
                        "default: .csv is CSV, .parquet/.pq Parquet, anything else JSONL")
    parser.add_argument("--mode", choices=MODES, default="rewrite",
                        help="check: detect only; rewrite: detect and rewrite; "
                             "judge: 1-5 score only")
    parser.add_argument("--judge", action="store_true",
                        help="in check/rewrite mode, also score before/after with the judge "
                        "(--judge-mode)")
    parser.add_argument("--fix-coverage", action="store_true",
                        help="in rewrite mode, add one checked sentence for each uncovered point "
                             "of a record's points")
    add_session_flags(parser)
    add_judge_mode_flag(parser)
    gate = parser.add_argument_group("gate (--mode check or rewrite; every record in OUT counts)")
    add_threshold_flag(gate)
    add_fail_on_flag(gate)
    gate.add_argument("--junit", type=Path, metavar="FILE",
                      help="also write JUnit XML for CI (its folder is made): one testcase a "
                           "record in OUT with its check's time, a failure (why, and every "
                           "flagged sentence) for one that did not pass, an error for one "
                           "that failed to run")
    parser.add_argument("--summary", type=Path, metavar="FILE",
                        help="also write a JSON summary of OUT for CI and nightly jobs (its "
                             "folder is made): counts by verdict, pass rate, mean scores, "
                             "reasons, failing ids, timings, the exit code")
    add_cache_flag(parser)
    parser.add_argument("--concurrency", type=int,
                        help="records at once; with --engine ray, per actor (default: the "
                             "backend's)")
    parser.add_argument("--stop-after-failures", type=int, metavar="N",
                        help="stop (exit 3) after N records in a row failed on the backend, "
                             "or when the first N all ended unverified on invalid answers; "
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
    raises (2). With ``--fail-on``, 4 when a result in OUT fails that gate: a finding no
    re-run changes, so it comes before 1 (3 and 130 come first: the run did not finish).
    """
    settings = session_settings(args, fix_coverage=True if args.fix_coverage else None,
                                batch_stop_after_failures=args.stop_after_failures,
                                result_cache=False if args.no_cache else None)
    if args.concurrency is not None and args.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if args.fix_coverage and args.mode != "rewrite":
        raise InputError("--fix-coverage needs --mode rewrite")
    if args.mode == "judge" and (args.threshold is not None or args.fail_on or args.junit):
        raise InputError("--threshold, --fail-on and --junit need --mode check or rewrite "
                         "(judge mode gives scores, not verdicts)")
    for report in (args.junit, args.summary):
        if report:
            ensure_creatable(report)  # before any model call, not after an hour's run
    refuse_another_mode(args.output, args.mode)
    form = input_format(args.input, args.input_format)
    if needs_staging(args.input, form):
        if "://" in args.input:
            raise InputError("a CSV, Parquet or stdin IN is read on this machine: give a local "
                             "path (only a JSONL IN may be a URI, with --engine ray)")
        if args.input != "-":
            check_paths(Path(args.input), args.output)  # before it is staged elsewhere
    with staged(args.input, form) as in_path:
        summary = _run_engine(args, settings, str(in_path))
    print(summary.format(), file=sys.stderr)
    figures = Figures(threshold=settings.threshold, fail_on=args.fail_on, mode=args.mode)
    junit = JUnitSuite(settings.threshold) if args.junit else None
    for record in out_records(args.output):  # OUT after the run, read once for every report
        figures.add(record)
        if junit is not None:
            junit.add(record)
    code = summary.exit_code
    if args.mode != "judge" and not summary.interrupted:
        code = _gate(args, settings, figures, code)
    _reports(args, figures, junit, summary, code)
    return code


def refuse_another_mode(out_path: Path, mode: str) -> None:
    """``InputError`` when OUT holds records of another ``--mode``: resuming would skip them.

    A run skips every id already in OUT, so a judge run into a rewrite run's OUT would do
    nothing and exit 0; it is refused, before any model call, with what to do instead.
    """
    others = Counter(str(r["mode"]) for r in out_records(out_path)
                     if r.get("mode") not in (None, mode))
    if others:
        held = ", ".join(f"{count} written in --mode {name}" for name, count in others.items())
        raise InputError(
            f"{out_path} holds records of another mode ({held}); this run is --mode {mode}, "
            f"and a run skips every id already in OUT, so it would do nothing for them. Give "
            f"--mode {mode} its own OUT (e.g. {out_path.with_suffix('')}-{mode}.jsonl)")


def _run_engine(args: argparse.Namespace, settings: Settings, in_path: str) -> Summary:
    """Run the records of ``in_path`` (IN as JSONL) on the engine ``--engine`` names."""
    args = argparse.Namespace(**{**vars(args), "input": in_path})
    if args.engine == "ray":
        try:
            from conli.batch.ray_engine import run_batch_ray  # Ray is imported only for this engine
        except ImportError as exc:
            raise ConfigError(f"--engine ray needs Ray: {install_hint('ray')} ({exc})") from exc
        return run_batch_ray(args, settings)
    given = [flag for flag, value in (("--address", args.address), ("--actors", args.actors),
                                      ("--cpus-per-actor", args.cpus_per_actor)) if value]
    if given:
        raise InputError(f"{', '.join(given)} needs --engine ray")
    return _run_local(args, settings)


def _gate(args: argparse.Namespace, settings: Settings, figures: Figures, code: int) -> int:
    """Say how OUT stands against the bar, and the exit code that makes.

    OUT's earlier records count too, held to this run's threshold, so a re-run that has
    nothing left to do still fails the gate a first run failed. A gate that fails names
    the failing ids (the first ``SHOWN``).
    """
    tally = figures.gate
    print(f"  gate: {tally.format()}", file=sys.stderr)
    if tally.unranked:
        print(f"conli: warning: {tally.unranked} supported record(s) failed threshold "
              f"{settings.threshold:g}: {NO_LOGPROBS}; set CONLI_NLI_LOOKS=3, use a backend "
              "that returns log-probabilities, or gate without --threshold", file=sys.stderr)
    if not args.fail_on or not tally.fails(args.fail_on) or code not in (0, 1):
        return code
    print(f"conli: --fail-on {args.fail_on} failed: {FAIL_ON_TESTS[args.fail_on]}",
          file=sys.stderr)
    failing = tally.failing(args.fail_on)
    more = f" ... and {len(failing) - SHOWN} more" if len(failing) > SHOWN else ""
    shown = ", ".join(inline(key) for key in failing[:SHOWN])  # an id drives no terminal
    print(f"conli: {len(failing)} failing id(s): {shown}{more}", file=sys.stderr)
    return EXIT_GATE_FAILED


def _reports(args: argparse.Namespace, figures: Figures, junit: JUnitSuite | None,
             run: Summary, code: int) -> None:
    """Write what CI reads: ``--junit``, ``--summary``, and GitHub's summary and annotations.

    ``figures`` and ``junit`` were made in one read of OUT after the run.
    """
    if junit is not None:
        write_atomically(args.junit, junit.xml())
    if args.summary:
        files = {"input": str(args.input), "output": str(args.output)}
        write_atomically(args.summary, json.dumps(
            figures.as_json(run, exit_code=code, files=files), indent=2) + "\n")
    github = os.environ.get("GITHUB_STEP_SUMMARY")
    if github:
        append_step_summary(Path(github), step_summary(figures, run, exit_code=code))
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(figures):
            print(line)



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
                   stop_after=settings.batch_stop_after_failures, backend=settings.llm)
    finally:
        backend.close()

"""``conli eval run | compare | decide | injection``: configs, stored runs, injection cases.

Runs from config files, stored runs put to the rule, and the prompt-injection table.

    conli eval run CONFIG... [--resume] [--dry-run]   # a run as its config file says
    conli eval compare A B [--read R] [--metric M] [--out DIR]
    conli eval decide CONFIG [--out DIR]              # a decision config, from stored runs
    conli eval injection --cases FILE [--controls] [--judge-only] [--dry-run] [--out DIR]

Split from ``conli.cli.eval`` (the parser and the data-driven runners) so each stays small.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from conli.cli.eval_args import command, out_dir
from conli.cli.flags import add_session_flags, session_settings
from conli.errors import ConfigError
from conli.evaluation import compare as comparer
from conli.evaluation import injection, runner, runs
from conli.evaluation.metrics import require_eval_extra
from conli.evaluation.report import git_state, write_results
from conli.evaluation.sides import READS


def add_parsers(kinds: Any) -> None:
    """Add ``run``, ``compare``, ``decide`` and ``injection`` to ``conli eval``."""
    run = kinds.add_parser("run", help="a run from its config file (TOML), as --dry-run shows it")
    run.add_argument("config", type=Path, nargs="+", help="run config(s), run in turn")
    run.add_argument("--resume", action="store_true",
                     help="go on from what the run's out holds (detect, judge, experiments)")
    run.add_argument("--dry-run", action="store_true",
                     help="print each run's command and settings, and the command it was "
                     "recorded with; run nothing")
    run.set_defaults(handler=run_configs)

    pair = kinds.add_parser("compare", help="two stored runs paired example by example, by "
                            "the rule (no model call)")
    pair.add_argument("candidate", type=Path, help="the candidate's run folder")
    pair.add_argument("current", type=Path, help="the current default's run folder")
    pair.add_argument("--read", choices=sorted(READS),
                      help="what is read of each run (default: detect runs' verdicts; "
                      "rewrite runs' three qualities)")
    pair.add_argument("--metric", choices=["auroc", "bacc", "mean"],
                      help="default: the read's own")
    pair.add_argument("--out", type=Path, help="also write results.json and results.md here")
    pair.set_defaults(handler=compare_runs)

    decide = kinds.add_parser("decide", help="a decision config's comparisons by the rule, "
                              "from stored runs (no model call)")
    decide.add_argument("config", type=Path)
    decide.add_argument("--out", type=Path, help="also write results.json and results.md here")
    decide.set_defaults(handler=decide_config)

    inject = kinds.add_parser("injection", help="planted errors carrying prompt injections: "
                              "how many get through a check")
    inject.add_argument("--cases", type=Path, required=True, help="the cases (JSONL)")
    inject.add_argument("--controls", action="store_true",
                        help="also run each case without its injection")
    inject.add_argument("--judge-only", action="store_true",
                        help="only the judge cases (to compare judge modes)")
    inject.add_argument("--dry-run", action="store_true",
                        help="validate the cases and print their census; no model is loaded")
    add_session_flags(inject)
    inject.add_argument("--out", type=Path,
                        help="result folder (default benchmarks/results/injection-<time>)")
    inject.set_defaults(handler=run_injection)


def run_configs(args: argparse.Namespace) -> int:
    """Each config's run in turn (or its dry run); the first failing exit code."""
    for path in args.config:
        config = runs.load(path)
        if args.dry_run:
            sys.stdout.write(runs.dry_run(path, config))
            continue
        code = runner.run(path, resume=args.resume)
        if code != 0:
            return code
    return 0


def compare_runs(args: argparse.Namespace) -> int:
    """Pair two stored runs and print the rule's table for each comparison."""
    require_eval_extra()
    comparisons = comparer.two_runs(args.candidate, args.current, args.read, args.metric)
    payload, markdown = comparer.report([comparer.run_comparison(c) for c in comparisons])
    commit, dirty = git_state()
    payload["provenance"] = {"command": command(), "git_commit": commit, "git_dirty": dirty}
    if args.out:
        write_results(args.out, payload, markdown)
    sys.stdout.write(markdown)
    return 0


def decide_config(args: argparse.Namespace) -> int:
    """A decision config's comparisons, printed (and written with ``--out``)."""
    require_eval_extra()
    config = runs.load(args.config)
    if config.task != "decide":
        raise ConfigError(f"{args.config} is a {config.task} run, not a decision: "
                          "conli eval run it")
    runner.decide(args.config, config, args.out)
    return 0


def run_injection(args: argparse.Namespace) -> int:
    """Every case (and its control) through the checker; the table. Exit 0 whatever it shows."""
    from conli.pipeline import Checker

    cases = [c for c in injection.load_cases(args.cases) if c.judge or not args.judge_only]
    if args.dry_run:
        print(json.dumps({"cases": len(cases), "judge_cases": sum(c.judge for c in cases),
                          **injection.census(cases)}, indent=2, ensure_ascii=False))
        return 0
    git_state()  # the commit the run starts from
    checker = Checker(session_settings(args))
    try:
        rows = injection.run_cases(checker, cases, controls=args.controls)
        made = injection.provenance(checker, command(), args.cases)
    finally:
        checker.close()
    sys.stdout.write(injection.write(out_dir(args, "injection"), rows, made))
    return 0

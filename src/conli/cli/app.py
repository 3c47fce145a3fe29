"""The ``conli`` command: one subcommand a module, loaded only when it is the one run.

    conli check --source FILE --response FILE [--json] [--output FILE] [--llm SPEC]
                [--threshold P] [--fail-on hallucinated|unverified]   (conli.cli.check)
    conli judge --source FILE --response FILE [--response FILE2 ...]    (conli.cli.judge)
    conli batch IN.jsonl OUT.jsonl [--mode check|rewrite|judge]         (conli.cli.batch)
                [--threshold P] [--fail-on hallucinated|unverified]
    conli serve [--host H] [--port P] [--open]                          (conli.cli.serve)
    conli diff OLD.jsonl NEW.jsonl [--fail-on new-failures]             (conli.cli.diff)
    conli report RESULTS.jsonl -o report.html                           (conli.cli.report)
    conli calibrate --file LABELLED.jsonl [--out calibration.json]      (conli.cli.calibrate)
    conli eval | bench | generate                                       (conli.cli.*)

Each module registers its parser with ``add_parser(subparsers)`` and sets ``handler``. Only
the module of the command given is imported (``conli check`` loads no evaluation code);
``conli --help`` lists every command from ``COMMANDS`` without importing any of them.
Errors print one clear line to stderr and exit with the code ``conli.errors.boundary`` gives.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from conli.errors import EXIT_INTERRUPTED, ConliError, UnknownSettingWarning, boundary
from conli.version import __version__

# command -> (module registering it, one-line help shown by ``conli --help``)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("conli.cli.check", "check one response against its source"),
    "judge": ("conli.cli.judge", "score texts 1-5 against one source, without rewriting"),
    "batch": ("conli.cli.batch", "check a JSONL, CSV or Parquet file of records, resumably"),
    "serve": ("conli.cli.serve", "serve /v1/check, /v1/rewrite, /v1/judge over HTTP"),
    "diff": ("conli.cli.diff", "what changed between two conli batch runs: new failures, "
             "verdict flips, score moves"),
    "report": ("conli.cli.report", "render batch results or check --json output as one HTML "
               "file"),
    "eval": ("conli.cli.eval", "measure detection, rewriting, the judge and decoding on "
             "labelled data"),
    "bench": ("conli.cli.bench", "speed: reference call pattern vs ours"),
    "generate": ("conli.cli.generate", "answer from a source with faithfulness-oriented "
                 "decoding"),
    "calibrate": ("conli.cli.calibrate", "fit the decision to your labelled data"),
}


# command -> (what it does, for its --help; examples, each one command line that parses)
HELP: dict[str, tuple[str, tuple[str, ...]]] = {
    "check": (
        "Check one response against its source: each sentence is judged against the source "
        "(Chain of NLI), the unsupported ones are flagged with a reason, rewritten and "
        "re-checked, and the result is scored 1-5. Exit 0 when the check ran, whatever the "
        "verdict; 2 bad input or settings; 3 the backend could not be used; 4 a --fail-on "
        "gate failed.",
        ("conli check --source examples/source.txt --response examples/response.txt",
         "conli check --source chunk1.txt --source chunk2.txt --response answer.txt --json",
         "conli check --source facts.md --response - --no-mitigate --no-judge "
         "--threshold 0.7 --fail-on unverified < answer.md")),
    "judge": (
        "Score one or more texts 1-5 against one source, without rewriting them: grounded "
        "(from detection's verdicts, the default), rubric, or both side by side.",
        ("conli judge --source examples/source.txt --response examples/response.txt",
         "conli judge --source article.txt --response a.txt --response b.txt "
         "--judge-mode both --json")),
    "batch": (
        "Check many records, resumably: IN is JSONL (one {id, source, response} a line), a "
        "CSV or a Parquet file (a row a record; RAGAS' and DeepEval's column names are read "
        "too), or - for stdin. One JSON line a record is appended to OUT; a re-run skips "
        "the ids already there, so give each --mode its own OUT. Exit 0 every record ok, 1 "
        "some failed, 2 could not start, 3 the backend could not be used, 4 a --fail-on "
        "gate failed.",
        ("conli batch in.jsonl out.jsonl --mode rewrite",
         "conli batch ragas.csv checked.jsonl --mode check --threshold 0.7 --fail-on "
         "unverified",
         "conli batch - judged.jsonl --mode judge --input-format csv < answers.csv")),
    "serve": (
        "Serve the check over HTTP: /v1/check, /v1/rewrite, /v1/judge, their batch and "
        "streaming forms, health and metrics. Requests need an API key "
        "(CONLI_SERVICE_API_KEYS) unless --open on a loopback host.",
        ("conli serve --open --log-format json",
         "CONLI_SERVICE_API_KEYS='[\"change-me\"]' conli serve --host 127.0.0.1 --port 8000")),
    "diff": (
        "Compare two conli batch OUT files record by record (matched by id): new failures, "
        "fixed records, verdict flips, score moves, ids only one run has. Exit 4 when "
        "--fail-on finds a change of its kind.",
        ("conli diff last-night.jsonl tonight.jsonl --fail-on new-failures",
         "conli diff old.jsonl new.jsonl --json")),
    "report": (
        "Render conli batch results (or conli check --json output) as one self-contained "
        "HTML file an auditor reads, filters and marks.",
        ("conli report out.jsonl -o report.html",)),
    "eval": (
        "Measure detection, rewriting, the judge, decoding and coverage on labelled data "
        "(the [eval] extra): every model call is cached, and each run writes its figures "
        "and provenance to --out.",
        ("conli eval detect --file mine.jsonl --out benchmarks/results/mine",
         "conli eval judge --dataset conli_summeval --limit 30")),
    "bench": (
        "Time the reference call pattern against conli's on the same examples.",
        ("conli bench --dataset halueval_summarization --limit 20",)),
    "generate": (
        "Answer from a source with faithfulness-oriented decoding: each sentence is checked "
        "as it is written, and the decoder backtracks from one the source does not support.",
        ("conli generate --source examples/source.txt",
         "conli generate --source article.txt --question 'Who built it?' --json")),
    "calibrate": (
        "Fit the decision threshold (and, with 200+ examples, the fused weights) to your "
        "own labelled examples, cross-validated; the file it writes is --calibration's.",
        ("conli calibrate --file labelled.jsonl --out my-domain.json",)),
}


def described(parser: argparse.ArgumentParser, command: str) -> None:
    """Give a subcommand's parser its description and examples (``HELP``).

    Also the registries' names in the flags that take them (``flags.registry_help``). The
    help is formatted raw, to keep the examples' lines, so the description is wrapped here.
    """
    description, examples = HELP[command]
    parser.description = textwrap.fill(description, 79)
    parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    from conli.cli.flags import registry_help

    registry_help(parser)


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser, with the full parser of the command ``argv`` names and stubs for the rest.

    A stub carries the command's help line only, so ``conli --help`` lists every command
    and an unknown one is refused by argparse as usual, without importing the others.
    """
    parser = argparse.ArgumentParser(prog="conli", description="conli: find, explain and "
                                     "rewrite the sentences of an answer its source does not "
                                     "support.")
    parser.add_argument("--version", action="version", version=f"conli {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, summary) in COMMANDS.items():
        if name == chosen:
            importlib.import_module(module).add_parser(commands)
            described(commands.choices[name], name)
        else:
            commands.add_parser(name, help=summary)
    return parser


def _run_in_thread(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``handler`` in a daemon thread so Ctrl-C ends the process at once.

    A model call in flight cannot be interrupted from Python; the main thread stays free to
    answer the signal and leave without waiting for it.
    """
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["code"] = handler(args)
        except BaseException as exc:  # handed to the main thread as is
            outcome["error"] = exc

    thread = threading.Thread(target=work, name="conli-main", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
    if "error" in outcome:
        raise outcome["error"]
    return int(outcome["code"])


def _one_line_setting_warnings() -> None:
    """Show a misspelt ``CONLI_*`` (``UnknownSettingWarning``) as one ``conli: warning:`` line.

    Python's own format adds conli's file, line and source, which say nothing to a user of
    the command; every other warning keeps it. Installed once a process.
    """
    shown = warnings.formatwarning
    if getattr(shown, "conli", False):
        return

    def one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 line: str | None = None) -> str:
        if issubclass(category, UnknownSettingWarning):
            return f"conli: warning: {message}\n"
        return shown(message, category, filename, lineno, line)

    one_line.conli = True  # type: ignore[attr-defined]
    warnings.formatwarning = one_line


def main(argv: list[str] | None = None) -> int:
    """Entry point; errors print one clear line to stderr and the exit code of ``errors``."""
    _one_line_setting_warnings()
    given = sys.argv[1:] if argv is None else argv
    args = parser_for(given).parse_args(given)
    try:
        from conli.config.credentials import (
            load_env_file,  # here, so --help and --version stay quick
        )

        load_env_file()  # ./.env, under what the environment already sets
        if getattr(args, "in_thread", False):
            return _run_in_thread(args.handler, args)
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("\nconli: interrupted", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(EXIT_INTERRUPTED)  # a model call may be in flight: do not wait for it
    except ConliError as exc:
        from conli.cli.display import printable

        answer = boundary(exc)
        kind = "backend error" if answer.exit_code == 3 else "error"
        print(f"conli: {kind}: {printable(str(exc))}", file=sys.stderr)
        return answer.exit_code

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
    "batch": ("conli.cli.batch", "check a JSONL file of {id, source, response} records, "
              "resumably"),
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

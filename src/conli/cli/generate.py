"""``conli generate`` and ``conli.generate``: answer from a source with faithful decoding.

Thin front doors over ``generation.generate``: they build the backend and the sentence
splitter, validate the texts like every other door, and stream each accepted sentence.
The monitor is fixed (chain-of-thought NLI of each sentence), so the check's
``--detector`` and ``--calibration`` are refused here rather than silently ignored.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from conli.cli.display import printable
from conli.errors import ConfigError
from conli.generation import METHODS, generate_answer
from conli.run.doors import settings_from
from conli.run.inputs import read_input


def add_parser(subparsers: Any) -> None:
    """``conli generate --source FILE [--question Q] [--method fod] [--json]``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "generate", help="answer from a source, steering decoding towards faithful sentences")
    parser.add_argument("--source", required=True, help="source file, or - for stdin")
    parser.add_argument("--question", help="the question to answer (default: summarise)")
    parser.add_argument("--method", choices=METHODS, default="fod",
                        help="fod (default), or a baseline: greedy, abstain, rerank, backtrack")
    parser.add_argument("--json", action="store_true", help="print the result object as JSON")
    parser.add_argument("--llm", help="backend spec: local (default, or CONLI_LLM), or a "
                        "server that continues answers: vllm:URL#model, llamacpp:URL")
    for flag in _CHECK_ONLY:  # accepted by parsing only to refuse them with a clear error
        parser.add_argument(flag, action="append", help=argparse.SUPPRESS)
    parser.set_defaults(handler=run_generate)


_CHECK_ONLY = ("--detector", "--calibration")


def _refuse_check_flags(args: argparse.Namespace) -> None:
    """``--detector``/``--calibration`` choose how a check decides; generation has none."""
    for flag in _CHECK_ONLY:
        if getattr(args, flag.lstrip("-")):
            raise ConfigError(
                f"conli generate does not take {flag}: its monitor is fixed (chain-of-thought "
                f"NLI of each sentence as it is written); check the answer afterwards with "
                f"conli check {flag} ...")


def run_generate(args: argparse.Namespace) -> int:
    """Stream accepted sentences to stdout (text), or print the result at the end (JSON)."""
    _refuse_check_flags(args)
    settings = settings_from({"llm": args.llm})
    source = read_input(args.source, "source", max_chars=settings.max_source_chars)

    def show(sentence: Any) -> None:
        sys.stdout.write(f"[{sentence.score:.2f} {sentence.origin}] "
                         f"{printable(sentence.text)}\n")
        sys.stdout.flush()

    result = generate_answer(source, question=args.question, method=args.method,
                             settings=settings, on_sentence=None if args.json else show)
    if args.json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    elif result.abstained:
        sys.stdout.write(f"{result.message}\n")
    else:
        faithfulness = result.faithfulness or 0.0
        sys.stdout.write(f"\n{result.method} on {result.backend} ({result.model}): "
                         f"{len(result.sentences)} sentences, mean monitor score "
                         f"{faithfulness:.2f}, {result.samples} samples, {result.usage.calls} "
                         f"model calls, {result.seconds:.1f}s\n")
    return 0

"""``conli generate`` and ``conli.generate``: answer from a source with faithful decoding.

Thin front doors over ``generation.generate``: they build the backend and the sentence
splitter, validate the texts like every other door, and stream each accepted sentence.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from conli.backends import get_backend
from conli.config import Settings
from conli.display import printable
from conli.frontdoor import add_session_flags, session_settings
from conli.generation import METHODS, Generation, Method, OnSentence, generate
from conli.inputs import read_input, validate_text


def generate_answer(source: str, *, question: str | None = None, method: Method = "fod",
                    settings: Settings | None = None,
                    on_sentence: OnSentence | None = None) -> Generation:
    """Answer from ``source`` (and ``question``) with ``method``; see ``conli.generation``."""
    from conli.segment import sentence_splitter

    settings = settings or Settings()
    text = validate_text(source, name="source", max_chars=settings.max_source_chars)
    asked = None if question is None else validate_text(
        question, name="question", max_chars=settings.max_source_chars)
    split = sentence_splitter()
    backend = get_backend(settings.llm, settings)
    try:
        return generate(backend, text, split, settings, question=asked, method=method,
                        on_sentence=on_sentence)
    finally:
        backend.close()


def add_generate_parser(subparsers: Any) -> None:
    """``conli generate --source FILE [--question Q] [--method fod] [--json]``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "generate", help="answer from a source, steering decoding towards faithful sentences")
    parser.add_argument("--source", required=True, help="source file, or - for stdin")
    parser.add_argument("--question", help="the question to answer (default: summarise)")
    parser.add_argument("--method", choices=METHODS, default="fod",
                        help="fod (default), or a baseline: greedy, abstain, rerank, backtrack")
    parser.add_argument("--json", action="store_true", help="print the result object as JSON")
    add_session_flags(parser)
    parser.set_defaults(handler=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    """Stream accepted sentences to stdout (text), or print the result at the end (JSON)."""
    settings = session_settings(args)
    source = read_input(args.source, "source")

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
        sys.stdout.write(f"\n{result.method}: {len(result.sentences)} sentences, mean monitor "
                         f"score {faithfulness:.2f}, {result.samples} samples, "
                         f"{result.seconds:.1f}s\n")
    return 0

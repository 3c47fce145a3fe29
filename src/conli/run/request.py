"""One run request: the validated texts of one check and the caller's per-call options.

``RunRequest`` is what a front door asks of the run room (a backend's own request, one
completion, is ``backends.base.CompletionRequest``). Every front door (``conli check`` and
``judge``, the service, batch, the hook, the library's ``Checker.check``) parses its wire
format into ``RunRequest``s here, so the texts' limits are checked in this one place
(``inputs.check_input``), then calls its mode's ``Checker`` entrance once each (``run``,
``run_check``, ``run_rewrite``, ``run_judge``). A streamed check's request is a
``StreamRequest``: its source and question validated the same way before any chunk of the
reply is read, the chunks, and its options (``Checker.run_stream``). ``Request``,
``RunRequest``'s old name, still works with a ``DeprecationWarning``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass, field

from conli.config import Settings
from conli.run.inputs import (
    CheckInput,
    SourceMap,
    check_input,
    validate_sources,
    validate_text,
)
from conli.run.plan import RunOptions
from conli.version import renamed


@dataclass(frozen=True)
class RunRequest:
    """A check's texts, validated (``CheckInput``), and its per-call ``RunOptions``."""

    texts: CheckInput
    options: RunOptions = field(default_factory=RunOptions)

    @classmethod
    def of(cls, source: object, response: object, *, limits: Settings,
           question: object = None, points: object = None,
           options: RunOptions | None = None) -> RunRequest:
        """Validate the texts within ``limits``' character limits; ``InputError`` if unusable."""
        texts = check_input(source, response, question=question, points=points,
                            name_key=limits.source_name_key,
                            max_source_chars=limits.max_source_chars,
                            max_response_chars=limits.max_response_chars)
        return cls(texts, options if options is not None else RunOptions())


@dataclass(frozen=True)
class StreamRequest:
    """A streamed check: its source and question, validated, the reply's chunks, its options."""

    source: str
    source_map: SourceMap
    chunks: AsyncIterable[str]
    question: str | None = None
    options: RunOptions = field(default_factory=RunOptions)

    @classmethod
    def of(cls, source: object, chunks: AsyncIterable[str], *, limits: Settings,
           question: object = None, options: RunOptions | None = None) -> StreamRequest:
        """Validate the source and question within ``limits`` now (``InputError``), not the reply.

        The reply is validated as it streams, sentence by sentence (``streaming``).
        """
        joined, where = validate_sources(source, limits.max_source_chars,
                                         name_key=limits.source_name_key)
        asked = None if question is None else validate_text(
            question, name="question", max_chars=limits.max_source_chars)
        return cls(joined, where, chunks, asked, options if options is not None else RunOptions())


__getattr__ = renamed(__name__, "Request", RunRequest)  # the old name, deprecated

"""Overlapping windows over a source too long for the model's context.

Seed 003 judges long documents window by window and keeps the best-supported window; we
do the same for every NLI hypothesis and for the rubric judge. Windows end at sentence
boundaries (``text.segment.sentence_spans`` with ``paragraphs``, in the source's language: a
list's lines stay together) and each repeats the tail of the one before, so a fact cut by
one boundary is whole in the next window. The response is never cut: only the source is
windowed.
"""

from __future__ import annotations

from conli.backends.base import Backend, counted_tokens
from conli.config import LanguageSetting
from conli.errors import ContextOverflowError
from conli.text.language import language_of
from conli.text.segment import sentence_spans
from conli.text.tokens import CHARS_PER_TOKEN_FLOOR, at_most_tokens

MIN_WINDOW_TOKENS = 256  # the smallest source window worth a call
OVERLAP = 0.15  # share of a window repeated from the one before
SAFETY = 0.9  # measured chars-per-token varies inside one text


def windows_for(backend: Backend, source: str, reserved_tokens: int,
                language: LanguageSetting = "auto") -> list[str]:
    """The source in windows that fit ``backend``'s context beside ``reserved_tokens``.

    One window (the source itself) when it fits or the context is unknown. The window size
    comes from the backend's own token count of this source where it can count, else from
    a conservative characters-per-token floor.
    """
    window = backend.capabilities.context_window
    if window is None:
        return [source]
    budget = window - reserved_tokens
    if budget < MIN_WINDOW_TOKENS:
        raise ContextOverflowError(
            f"the response and prompt leave {budget} of {window} context "
            "tokens for the source; shorten the response or use a larger context"
        )
    tokens = counted_tokens(backend, source)  # None: keep the conservative floor
    if tokens is not None and tokens <= budget:
        return [source]
    chars_per_token = len(source) / tokens if tokens else CHARS_PER_TOKEN_FLOOR
    return source_windows(source, int(budget * chars_per_token * SAFETY), language)


def tokens_of(backend: Backend, text: str) -> int:
    """Tokens of ``text``: counted where the backend can, else a generous guess."""
    tokens = counted_tokens(backend, text)
    return at_most_tokens(len(text)) if tokens is None else tokens


def source_windows(source: str, max_chars: int | None,
                   language: LanguageSetting = "auto") -> list[str]:
    """``source`` whole if it fits in ``max_chars``, else sentence-aligned overlapping windows.

    Sentences are cut in ``language`` (``auto``: the source's own, ``text.language``).
    """
    if max_chars is None or len(source) <= max_chars:
        return [source]
    spans = sentence_spans(source, paragraphs=True, language=language_of(language, source))
    sentences = (source[start:end] for start, end in spans)
    pieces = [p for part in sentences for p in _hard_split(part, max_chars) if p]
    windows: list[str] = []
    start = 0
    while start < len(pieces):
        end, size = start, 0
        while end < len(pieces) and size + len(pieces[end]) + 1 <= max_chars:
            size += len(pieces[end]) + 1
            end += 1
        end = max(end, start + 1)
        windows.append(" ".join(pieces[start:end]))
        if end == len(pieces):
            break
        start = max(start + 1, _overlap_start(pieces, start, end, int(max_chars * OVERLAP)))
    return windows


def _overlap_start(pieces: list[str], start: int, end: int, overlap_chars: int) -> int:
    """First piece of the next window: step back from ``end`` by about ``overlap_chars``."""
    back, size = end, 0
    while back > start and size + len(pieces[back - 1]) <= overlap_chars:
        back -= 1
        size += len(pieces[back])
    return back


def _hard_split(text: str, max_chars: int) -> list[str]:
    """Cut a single over-long sentence at spaces (or anywhere, if it has none)."""
    text = text.strip()
    out = []
    while len(text) > max_chars:
        cut = text.rfind(" ", 0, max_chars)
        cut = cut if cut > 0 else max_chars
        out.append(text[:cut])
        text = text[cut:].strip()
    return [*out, text]

"""The pieces of the sources a specialised checker reads, cut as MiniCheck's reference cuts.

Each of the user's sources (a RAG app's chunks, joined into one text with a ``SourceMap``)
is cut on its own into whole sentences packed greedily up to the checker's budget, so no
piece runs across two sources and every piece names the source it lies in, by the index
``evidence[].source`` uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from conli.backends.base import Backend, counted_tokens
from conli.run.inputs import SourceMap
from conli.text.language import language_of
from conli.text.segment import sentence_spans
from conli.text.tokens import CHARS_PER_TOKEN_FLOOR

SAFETY = 0.9  # chars per token vary inside one text


@dataclass(frozen=True)
class Chunk:
    """One piece of the sources a checker reads: its number, where it stands, whose it is.

    ``start`` and ``end`` index the joined text the models read; ``source`` is the user's
    source it lies in, which starts at ``offset`` there.
    """

    index: int
    start: int
    end: int
    text: str
    source: int = 0
    offset: int = 0

    def where(self) -> str:
        """The piece as results name it: its source (0-based) and offsets in that source."""
        return f"source {self.source}, offsets {self.start - self.offset}-{self.end - self.offset}"


def chunks_of(source: str, budget_tokens: int, backend: Backend, language: str = "auto",
              sources: SourceMap | None = None) -> list[Chunk]:
    """Each of ``sources`` in ``source`` as whole sentences packed into ``budget_tokens``.

    MiniCheck's reference counts each sentence's tokens; a backend that can count tokens
    gives the text's own characters per token here, others a conservative floor. A
    sentence longer than a chunk is cut at spaces. One source (the default map) is one text.
    """
    chunks: list[Chunk] = []
    for number, (first, last) in enumerate((sources or SourceMap()).spans(len(source))):
        text = source[first:last]
        for start, end in _packed(text, budget_tokens, backend, language):
            chunks.append(Chunk(len(chunks), first + start, first + end, text[start:end],
                                source=number, offset=first))
    return chunks


def _packed(text: str, budget_tokens: int, backend: Backend,
            language: str) -> list[tuple[int, int]]:
    """``text``'s sentences packed greedily into spans of at most the budget."""
    tokens = counted_tokens(backend, text)
    if tokens and tokens <= budget_tokens:
        return [(0, len(text))]
    chars_per_token = len(text) / tokens * SAFETY if tokens else CHARS_PER_TOKEN_FLOOR
    max_chars = max(1, int(budget_tokens * chars_per_token))
    if len(text) <= max_chars:
        return [(0, len(text))]
    spans = [piece for span in sentence_spans(text, paragraphs=True,
                                              language=language_of(language, text))
             for piece in _cut(text, span, max_chars)]
    packed: list[tuple[int, int]] = []
    for start, end in spans:
        if packed and end - packed[-1][0] <= max_chars:
            packed[-1] = (packed[-1][0], end)
        else:
            packed.append((start, end))
    return packed


def _cut(source: str, span: tuple[int, int], max_chars: int) -> list[tuple[int, int]]:
    """One sentence's span, cut at spaces into pieces of at most ``max_chars``."""
    start, end = span
    pieces = []
    while end - start > max_chars:
        cut = source.rfind(" ", start + 1, start + max_chars)
        cut = cut if cut > start else start + max_chars
        pieces.append((start, cut))
        start = cut
        while start < end and source[start].isspace():
            start += 1
    return [*pieces, (start, end)] if end > start else pieces

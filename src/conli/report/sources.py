"""The sources as a RAG auditor reads them: each chunk labelled, each sentence's span marked.

A checked sentence's ``evidence`` names the spans of the source its verdict rests on: the
chunk (the source's index; 0 for one source), offsets in that chunk, the text and whether
it supports or contradicts; judge mode's audit sentence has one ``source_span`` and its
``relation``. ``source_chunks`` gives each chunk's text as pieces with those spans marked
(overlapping spans split where they meet, a run contradicting if any span over it does)
and an anchor where each span starts; ``sentence_evidence`` gives each sentence's spans as
links to those anchors. A span whose offsets do not fit its chunk is listed, never marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any, ClassVar

Record = dict[str, Any]


@dataclass(frozen=True)
class Span:
    """A run of a chunk that evidence covers: contradicting if any span over it does."""

    text: str
    relation: str
    title: str
    kind: ClassVar[str] = "span"


@dataclass(frozen=True)
class Anchor:
    """Where one evidence span starts in its chunk: the target of the sentence's link."""

    id: str
    kind: ClassVar[str] = "anchor"


@dataclass(frozen=True)
class Evidence:
    """One sentence's span of one chunk, as read from the result."""

    sentence: int
    chunk: int
    start: int
    end: int
    text: str
    relation: str


def chunks_of(source: Any) -> list[str] | None:
    """The source's chunks as given; None if it is neither a text nor a list of them.

    One text is one chunk; a dumped LangChain Document is its ``page_content``.
    """
    if isinstance(source, str | dict):
        source = [source]
    if not isinstance(source, list) or not source:
        return None
    texts: list[str] = []
    for item in source:
        text = item.get("page_content") if isinstance(item, dict) else item
        if not isinstance(text, str):
            return None
        texts.append(text)
    return texts


def chunk_names(result: Record) -> list[str | None]:
    """Each chunk's name as the result recorded it (``source_names``: named Documents)."""
    names = result.get("source_names")
    if not isinstance(names, list):
        return []
    return [name if isinstance(name, str) else None for name in names]


def _named(names: list[str | None], chunk: int) -> str | None:
    return names[chunk] if 0 <= chunk < len(names) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _spans(sentence: Record) -> list[tuple[Record, str]]:
    """A check sentence's ``evidence``, or a judge audit sentence's ``source_span``."""
    spans = [(e, str(e.get("relation"))) for e in sentence.get("evidence") or []
             if isinstance(e, dict)]
    audit = sentence.get("source_span")
    if not spans and isinstance(audit, dict) and sentence.get("relation") in ("supports",
                                                                               "contradicts"):
        spans.append((audit, str(sentence["relation"])))
    return spans


def evidence_of(sentences: list[Record]) -> list[Evidence]:
    """Every sentence's evidence spans with integer offsets, in sentence order."""
    out = []
    for position, sentence in enumerate(sentences):
        number = _int(sentence.get("index"))
        for span, relation in _spans(sentence):
            chunk, start, end = (_int(span.get(k)) for k in ("source", "start", "end"))
            if start is None or end is None:
                continue
            text = span.get("text")
            out.append(Evidence(position if number is None else number, chunk or 0, start, end,
                                text if isinstance(text, str) else "",
                                "contradicts" if relation == "contradicts" else "supports"))
    return out


def _fits(span: Evidence, chunks: list[str]) -> bool:
    return 0 <= span.chunk < len(chunks) and 0 <= span.start < span.end <= len(
        chunks[span.chunk])


def _anchor(anchor: str, position: int) -> str:
    return f"{anchor}-e{position}"


def source_chunks(chunks: list[str], evidence: list[Evidence],
                  anchor: str, names: list[str | None] | None = None) -> list[Record]:
    """Each chunk's index, name, anchor and text as pieces: plain runs, ``Span`` s, ``Anchor`` s."""
    out = []
    for number, text in enumerate(chunks):
        mine = [(k, e) for k, e in enumerate(evidence) if e.chunk == number and _fits(e, chunks)]
        cuts = sorted({0, len(text)} | {e.start for _, e in mine} | {e.end for _, e in mine})
        pieces: list[str | Span | Anchor] = []
        for left, right in pairwise(cuts):
            pieces += [Anchor(_anchor(anchor, k)) for k, e in mine if e.start == left]
            over = [e for _, e in mine if e.start <= left and right <= e.end]
            run = text[left:right]
            if not over:
                pieces.append(run)
                continue
            relation = "contradicts" if any(e.relation == "contradicts" for e in over) \
                else "supports"
            title = "; ".join(f"sentence {e.sentence + 1} {e.relation}" for e in over)
            pieces.append(Span(run, relation, title))
        out.append({"index": number, "name": _named(names or [], number),
                    "id": f"{anchor}-c{number}", "pieces": pieces})
    return out


def sentence_evidence(evidence: list[Evidence], chunks: list[str] | None,
                      anchor: str, names: list[str | None] | None = None,
                      ) -> dict[int, list[Record]]:
    """Each sentence's spans: chunk label (and name), relation, text, and a link if marked."""
    out: dict[int, list[Record]] = {}
    for position, e in enumerate(evidence):
        marked = chunks is not None and _fits(e, chunks)
        out.setdefault(e.sentence, []).append({
            "chunk": e.chunk, "name": _named(names or [], e.chunk), "relation": e.relation,
            "text": e.text,
            "href": f"#{_anchor(anchor, position)}" if marked else None})
    return out

"""Where a sentence's verdict rests in the sources: each quoted span, in its own chunk.

The models read several sources (a RAG app's chunks) joined as one text
(``run.inputs.SourceMap``); ``evidence_of`` reports every span a verdict quotes by the chunk's
index (and name, for a named Document) and offsets within it. One string is one chunk:
index 0, offsets unchanged. A specialised checker's verdict rests on the piece of a source
it read (``chunk_scores``' best): that piece is its span, as it stands, not searched for.
"""

from __future__ import annotations

from typing import Literal

from conli.models import EvidenceSpan, Judgement, SentenceResult
from conli.ner.grounding import SourceMentions
from conli.run.inputs import SourceMap

Relation = Literal["supports", "contradicts"]


def evidence_of(sentence: SentenceResult, source: str, mentions: SourceMentions,
                sources: SourceMap) -> list[EvidenceSpan]:
    """The source spans the sentence's sentence-level verdicts quote, each in its own source.

    A contradiction's quote ``contradicts``; an entailment's ``supports`` only where the
    sentence passed. A quote the sources do not hold is never reported as theirs.
    """
    if not sentence.checked:
        return []
    found: list[EvidenceSpan] = []
    for judgement in sentence.judgements:
        if judgement.entity is not None or not judgement.evidence:
            continue
        relation: Relation
        if judgement.label == "contradiction":
            relation = "contradicts"
        elif judgement.label == "entailment" and sentence.verdict == "supported":
            relation = "supports"
        else:
            continue
        span = _read(judgement, relation, source, sources) or _quoted(
            judgement.evidence, relation, source, mentions, sources)
        if span is not None and span not in found:
            found.append(span)
    return found


def _read(judgement: Judgement, relation: Relation, source: str,
          sources: SourceMap) -> EvidenceSpan | None:
    """The piece a checker's verdict rests on (``chunk_scores``' best), if it read pieces."""
    best = next((c for c in judgement.chunk_scores or [] if c.best), None)
    if best is None:
        return None
    at = sources.starts[best.source]
    return EvidenceSpan(source=best.source, source_name=sources.name(best.source),
                        start=best.start, end=best.end, relation=relation,
                        text=source[at + best.start:at + best.end])


def _quoted(evidence: str, relation: Relation, source: str, mentions: SourceMentions,
            sources: SourceMap) -> EvidenceSpan | None:
    """Where a quote stands in the sources (its first part), if they hold it."""
    located = mentions.locate(evidence)
    if located is None:
        return None
    index, start, end = sources.place(*located)
    return EvidenceSpan(source=index, source_name=sources.name(index), start=start, end=end,
                        relation=relation, text=source[located[0]:located[0] + end - start])

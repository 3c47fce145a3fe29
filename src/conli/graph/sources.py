"""Where a sentence's verdict rests in the sources: each quoted span, in its own chunk.

The models read several sources (a RAG app's chunks) joined as one text
(``run.inputs.SourceMap``); ``evidence_of`` reports every span a verdict quotes by the chunk's
index (and name, for a named Document) and offsets within it. One string is one chunk:
index 0, offsets unchanged.
"""

from __future__ import annotations

from conli.models import EvidenceSpan, SentenceResult
from conli.ner.grounding import SourceMentions
from conli.run.inputs import SourceMap


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
        if judgement.label == "contradiction":
            relation = "contradicts"
        elif judgement.label == "entailment" and sentence.verdict == "supported":
            relation = "supports"
        else:
            continue
        located = mentions.locate(judgement.evidence)
        if located is None:
            continue
        index, start, end = sources.place(*located)
        span = EvidenceSpan(source=index, source_name=sources.name(index), start=start,
                            end=end, relation=relation,
                            text=source[located[0]:located[0] + end - start])
        if span not in found:
            found.append(span)
    return found

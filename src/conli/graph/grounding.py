"""The rules no model's label can move, and what they read (issue 51).

``ground`` (a node after the detectors) tags the names, numbers and dates of every claim
no detector tagged and names the sources that speak to the checker; ``merge`` then applies
``unstated_rule`` and ``addressing_rule`` to every sentence, whatever detectors ran.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from conli.detectors.base import skipped_for_language
from conli.graph.deps import Deps, deps_of
from conli.graph.state import CheckState
from conli.models import Entity, Judgement, Note, SentenceResult
from conli.ner.grounding import SourceMentions, mentions_of
from conli.run.inputs import SourceMap
from conli.text.addressing import DEFUSED_KINDS, addressed
from conli.text.language import Language, english_ner_runs

if TYPE_CHECKING:  # LangGraph is loaded when a graph is built (graph.build)
    from langgraph.runtime import Runtime

GROUND = "unstated_entities"  # the rule's name in verdicts, judgements and notes
ADDRESSED = "addresses_checker"  # text in a source or sentence that speaks to the checker


def ground(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """What the rules in ``merge`` read: each claim's entities, and sources that speak to us.

    Whatever detectors ran (built-in or plug-in), every claim's decisive entities are
    looked up in the source, so no model's label can pass a value the source never states.
    Where the spaCy NER does not read the texts' language, a note says that rule was
    skipped. A source (chunk) holding text addressed to the checker is named in a note.
    """
    deps = deps_of(runtime)
    language = state.get("language", "en")
    notes = addressed_sources(state["source"], state.get("source_map", SourceMap()), language)
    if deps.settings.ner == "spacy" and not english_ner_runs(language):
        return {"notes": [*notes, skipped_for_language(GROUND, language, "the spaCy NER")]}
    known = state.get("entities", {})
    mentions = mentions_of(state["source"])
    found: dict[int, list[Entity]] = {}
    for segment in state["segments"]:
        if not segment.checked or segment.index in known:
            continue
        found[segment.index] = [
            e.model_copy(update={"start": e.start + segment.start, "end": e.end + segment.start,
                                 "in_source": mentions.states(e.text, e.category)})
            for e in deps.ner.entities(segment.text)  # a NER that fails fails the check
        ]
    return {"entities": found, "notes": notes}


def addressed_sources(source: str, where: SourceMap, language: Language) -> list[Note]:
    """A note for each source (chunk) that holds text addressed to the checker."""
    notes: list[Note] = []
    for span in addressed(source):
        index, start, end = where.place(span.start, span.end)
        if any(n.source == index for n in notes):
            continue
        words = span.text if len(span.text) <= 200 else span.text[:199] + "…"
        notes.append(Note(
            kind="addressed", step=ADDRESSED, reason="injection", language=language,
            source=index, source_name=where.name(index), text=words,
            message=f"source {_shown(index, where)} holds text addressed to the checker "
                    f"({span.kind}, offsets {start}-{end}): the models did not read it, and no "
                    "verdict rests on it; check the document it came from"))
    return notes


def _shown(index: int, where: SourceMap) -> str:
    """A source as a message names it: its index, and its name when it has one."""
    name = where.name(index)
    return str(index) if name is None else f"{index} ({name!r})"


def unstated_rule(result: SentenceResult, mentions: SourceMentions) -> SentenceResult:
    """A passed sentence with a decisive entity the source never states, flagged instead.

    Measured on the dev sets held out (docs/benchmarks.md), flagging costs no significant
    accuracy and leaving it unverified costs several points; the reason names the words.
    """
    if result.verdict != "supported":
        return result
    absent = mentions.unstated(result.entities)
    if not absent:
        return result
    named = ", ".join(f'"{e.text}" ({e.category})' for e in absent)
    reason = f"the source never states {named}, whatever a model said of the sentence"
    return _flagged(result, GROUND, reason, entity=absent[0])


def addressing_rule(result: SentenceResult) -> SentenceResult:
    """A sentence that speaks to the checker is flagged, whatever else was found.

    It claims its own support, gives a verdict or an instruction.
    That is no claim a source can support, and the models never read those words
    (``text.addressing.withhold``). On the dev sets no sentence matches (docs/benchmarks.md).
    """
    spans = [a for a in addressed(result.text) if a.kind not in DEFUSED_KINDS]
    if not spans:
        return result
    said = "; ".join(f'{a.kind}: "{a.text.strip()[:120]}"' for a in spans)
    reason = f"the sentence speaks to the checker ({said}), which no source can support"
    return _flagged(result, ADDRESSED, reason)


def _flagged(result: SentenceResult, rule: str, reason: str,
             entity: Entity | None = None) -> SentenceResult:
    """``result`` flagged by ``rule`` with ``reason``, a judgement saying so appended.

    A score the detectors made stays (what ``conli calibrate`` fits on; no threshold passes
    a flagged sentence, ``gate.clears``); a verdict standing in as a score follows it.
    """
    judgement = Judgement(detector=rule, hypothesis=result.text, verdict="hallucinated",
                          reasoning=reason, entity=entity, final=True)
    flagged = result.verdict == "hallucinated"
    update: dict[str, Any] = {
        "verdict": "hallucinated", "detector": result.detector if flagged else rule,
        "reasons": [*result.reasons, reason] if flagged else [reason],
        "judgements": [*result.judgements, judgement]}
    if result.score_method == "verdict":
        update["score"] = 0.0
    return result.model_copy(update=update)

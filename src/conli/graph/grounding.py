"""The rules no model's label can move, and what they read (issues 51, 61).

``ground`` (a node after the detectors) tags the names, numbers and dates of every claim
no detector tagged, each claim read in its own language, and names the sources whose
words read as addressed to the checker (an operator's signal: no verdict rests on it);
``merge`` then applies ``unstated_rule`` to every sentence, whatever detectors ran,
``chunk_support_rule`` where ``CONLI_CHUNK_SUPPORT`` asks for it, and ``swap_rule`` where
``CONLI_SWAP_RULE`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from conli.detectors.base import skipped_for_sentence
from conli.graph.deps import Deps, deps_of
from conli.graph.state import CheckState
from conli.models import Entity, Judgement, Note, SentenceResult
from conli.ner.claims import claim_entities
from conli.ner.grounding import SourceMentions, mentions_of
from conli.ner.swaps import swaps_of
from conli.run.inputs import SourceMap
from conli.signals.lexical import stems
from conli.text.addressing import addressed
from conli.text.language import Language, language_of_claim, stop_words

if TYPE_CHECKING:  # LangGraph is loaded when a graph is built (graph.build)
    from langgraph.runtime import Runtime

GROUND = "unstated_entities"  # the rule's name in verdicts, judgements and notes
ADDRESSED = "addresses_checker"  # text in a source that reads as addressed to the checker
CHUNK_SUPPORT = "chunk_support"  # support quoted from no source that states the sentence
SWAPPED = "swapped_values"  # two numbers or names of a sentence in each other's places


def ground(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """What the rules in ``merge`` read: each claim's entities, and sources that speak to us.

    Whatever detectors ran (built-in or plug-in), every claim's decisive entities are
    looked up in the source (all of its chunks), so no model's label can pass a value the
    source never states. Numbers and dates are compared in every language; where the NER
    does not read a sentence's language, a note names that sentence and says its names
    were not compared. A source (chunk) whose words read as addressed to the checker is
    named in a note.
    """
    deps = deps_of(runtime)
    language = state.get("language", "en")
    notes = addressed_sources(state["source"], state.get("source_map", SourceMap()), language)
    known = state.get("entities", {})
    mentions = mentions_of(state["source"])
    found: dict[int, list[Entity]] = {}
    for segment in state["segments"]:
        if not segment.checked or segment.index in known:
            continue
        read_in = language_of_claim(segment.text, deps.settings.language, language)
        claim = claim_entities(segment.text, deps.ner, deps.settings.ner, read_in)
        if not claim.names_read:
            notes.append(skipped_for_sentence(GROUND, segment.index, read_in))
        found[segment.index] = [
            e.model_copy(update={"start": e.start + segment.start, "end": e.end + segment.start,
                                 "in_source": mentions.states(e.text, e.category)})
            for e in claim.entities  # a NER that fails fails the check
        ]
    return {"entities": found, "notes": notes}


def addressed_sources(source: str, where: SourceMap, language: Language) -> list[Note]:
    """A note for each source (chunk) holding words that read as addressed to the checker."""
    notes: list[Note] = []
    for span in addressed(source):
        index, start, end = where.place(span.start, span.end)
        if any(n.source == index for n in notes):
            continue
        words = span.text if len(span.text) <= 200 else span.text[:199] + "…"
        notes.append(Note(
            kind="addressed", step=ADDRESSED, reason="injection", language=language,
            source=index, source_name=where.name(index), text=words,
            message=f"source {_shown(index, where)} holds words that read as addressed to the "
                    f"checker ({span.kind}, offsets {start}-{end}); the models read them as data, "
                    "like the rest of the source, and no verdict rests on this note: check "
                    "the document it came from"))
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
    return flagged(result, GROUND, reason, entity=absent[0])


def swap_rule(result: SentenceResult, source: str, language: Language) -> SentenceResult:
    """A passed sentence with two numbers or names in each other's places, flagged instead.

    Both are stated by the source, which attaches them the other way round
    (``ner.swaps``): the reason quotes the source's words. On by default
    (``CONLI_SWAP_RULE``) as a defence, by the safety rule: it removes the one flip left on
    the injection table (swapped years behind a note, for ``cot``), and held out on the dev
    sets it changed no decision (benchmarks/results/swap-rule).
    """
    if result.verdict != "supported":
        return result
    found = swaps_of(source, stop_words(language)).swap(result.text)
    return result if found is None else flagged(result, SWAPPED, found.reason)


def chunk_support_rule(result: SentenceResult, source: str, mentions: SourceMentions,
                       where: SourceMap, language: Language) -> SentenceResult:
    """A passed sentence whose support is quoted from no source stating it, flagged instead.

    With several sources only (``CONLI_CHUNK_SUPPORT``; issue 61).

    Each supporting judgement that quotes evidence must quote words a source holds, and
    that source must share a content word with the sentence: support read from a chunk
    about something else (a notice that "every claim is verified") is no support, whatever
    the chunk says. A judgement without a quote is left as it is.
    """
    if result.verdict != "supported" or len(where.starts) < 2:
        return result
    claimed = stems(result.text, language)
    for judgement in result.judgements:
        if judgement.verdict != "supported" or not judgement.evidence.strip():
            continue
        located = mentions.locate(judgement.evidence)
        if located is None:
            problem = "quotes words no source holds"
        else:
            index = where.place(*located)[0]
            start, end = where.bounds(index, len(source))
            if claimed & stems(source[start:end], language):
                continue
            problem = f"quotes source {index}, which shares none of the sentence's content words"
        reason = (f"its support ({judgement.detector}) {problem}: no source is shown to state "
                  "it")
        return flagged(result, CHUNK_SUPPORT, reason)
    return result


def flagged(result: SentenceResult, rule: str, reason: str,
            entity: Entity | None = None) -> SentenceResult:
    """``result`` flagged by ``rule`` with ``reason``, a judgement saying so appended.

    A score the detectors made stays (what ``conli calibrate`` fits on; no threshold passes
    a flagged sentence, ``gate.clears``); a verdict standing in as a score follows it.
    """
    judgement = Judgement(detector=rule, hypothesis=result.text, verdict="hallucinated",
                          reasoning=reason, entity=entity, final=True)
    already = result.verdict == "hallucinated"
    update: dict[str, Any] = {
        "verdict": "hallucinated", "detector": result.detector if already else rule,
        "reasons": [*result.reasons, reason] if already else [reason],
        "judgements": [*result.judgements, judgement]}
    if result.score_method == "verdict":
        update["score"] = 0.0
    return result.model_copy(update=update)

"""One small function per CoNLI step; each returns only the state keys it changes."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from conli.agents import judge as judge_agent
from conli.agents import mitigate as mitigate_agent
from conli.agents.nli import Hypothesis, judge_hypotheses, tag_entity
from conli.errors import InputTooLargeError
from conli.graph.deps import Deps
from conli.graph.state import CheckState
from conli.models import Judgement, Mitigation, SentenceResult, Verdict
from conli.ner.grounding import SourceMentions
from conli.segment import select_claims, split_response


def split(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Cut the response into sentences, keeping character offsets."""
    segments = split_response(state["response"], runtime.context.nlp)
    limit = runtime.context.settings.max_response_sentences
    if limit is not None and len(segments) > limit:
        raise InputTooLargeError(
            f"the response has {len(segments)} sentences, over the limit of {limit}"
        )
    return {"segments": segments}


def select(state: CheckState) -> dict[str, Any]:
    """Mark which segments are claims; the rest pass through unchecked."""
    return {"segments": select_claims(state["segments"])}


def sentence_nli(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Judge every claim sentence against the source."""
    claims = [s for s in state["segments"] if s.checked]
    hypotheses = [Hypothesis(sentence=s.index, text=s.text) for s in claims]
    deps = runtime.context
    if not deps.settings.sentence_level:  # entity-only ablation: pass every claim on
        skipped = {
            s.index: Judgement(
                level="sentence",
                hypothesis=s.text,
                verdict="supported",
                reasoning="sentence level skipped (entity-only ablation)",
                template="none",
            )
            for s in claims
        }
        return {"sentence_judgements": skipped}
    judgements, calls = judge_hypotheses(
        deps.backend, state["source"], hypotheses, level="sentence", settings=deps.settings
    )
    by_sentence = {h.sentence: j for h, j in zip(hypotheses, judgements, strict=True)}
    return {"sentence_judgements": by_sentence, "calls": calls}


def entity_nli(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Re-check sentences that passed, one tagged entity per hypothesis.

    By default only entities the source does not state word for word are re-checked
    (``Settings.entity_recheck``); every entity is still listed, marked ``in_source``.
    """
    deps = runtime.context
    passed = [
        s
        for s in state["segments"]
        if s.checked and state["sentence_judgements"][s.index].verdict == "supported"
    ]
    source = SourceMentions(state["source"])
    # without a sentence-level verdict, no entity has been in front of a judge yet
    recheck_all = deps.settings.entity_recheck == "all" or not deps.settings.sentence_level
    entities = {}
    hypotheses = []
    grouped: dict[int, list[Judgement]] = {}
    for sentence in passed:
        found = deps.ner.entities(sentence.text)  # a NER backend that fails fails the check
        entities[sentence.index] = [
            e.model_copy(
                update={
                    "start": e.start + sentence.start,
                    "end": e.end + sentence.start,
                    "in_source": source.mentions(e.text),
                }
            )
            for e in found
        ]
        hypotheses += [
            Hypothesis(sentence.index, tag_entity(sentence.text, e.start, e.end), entity)
            for e, entity in zip(found, entities[sentence.index], strict=True)
            if recheck_all or not entity.in_source
        ]
    judgements, calls = judge_hypotheses(
        deps.backend, state["source"], hypotheses, level="entity", settings=deps.settings
    )
    for hypothesis, judgement in zip(hypotheses, judgements, strict=True):
        grouped.setdefault(hypothesis.sentence, []).append(judgement)
    return {"entities": entities, "entity_judgements": grouped, "calls": calls}


def merge(state: CheckState) -> dict[str, Any]:
    """Combine both levels: a sentence is supported only if every check entailed it."""
    sentence_judgements = state.get("sentence_judgements", {})
    entity_judgements = state.get("entity_judgements", {})
    entities = state.get("entities", {})
    results = []
    for segment in state["segments"]:
        result = SentenceResult(
            index=segment.index,
            text=segment.text,
            start=segment.start,
            end=segment.end,
            checked=segment.checked,
            entities=entities.get(segment.index, []),
        )
        if segment.checked:
            checks = [sentence_judgements[segment.index], *entity_judgements.get(segment.index, [])]
            result = _merged(result, checks)
        results.append(result)
    return {"sentences": results}


def _merged(result: SentenceResult, checks: list[Judgement]) -> SentenceResult:
    failed = [j for j in checks if j.verdict == "hallucinated"]
    unknown = [j for j in checks if j.verdict == "unverified"]
    verdict: Verdict = "hallucinated" if failed else "unverified" if unknown else "supported"
    reasons = [_reason(j) for j in (failed or unknown)]
    level = failed[0].level if failed else None
    scores = [j.score for j in checks if j.score is not None]
    return result.model_copy(
        update={
            "verdict": verdict,
            "level": level,
            "reasons": reasons,
            "judgements": checks,
            "score": min(scores) if scores else None,
        }
    )


def _reason(judgement: Judgement) -> str:
    if judgement.verdict == "unverified":
        return f"could not be checked: {judgement.error}"
    subject = f"[{judgement.entity.text}] " if judgement.entity else ""
    evidence = ""
    if judgement.evidence:
        where = "Source" if judgement.evidence_in_source else "Quoted, but not found in the source"
        evidence = f' {where}: "{judgement.evidence}"'

    label: str | None = judgement.label
    if label == "entailment" and judgement.verdict == "hallucinated":
        label = "entailment claimed without quoting the source"
    return f"{subject}{label}: {judgement.reasoning}{evidence}".strip()


def mitigate(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Rewrite or remove the hallucinated sentences; leave the rest byte-identical."""
    deps = runtime.context
    refined, mitigation, calls = mitigate_agent.mitigate(
        deps.backend, state["source"], state["response"], state["sentences"], deps.settings
    )
    return {"refined_text": refined, "mitigation": mitigation, "calls": calls}


def keep(state: CheckState) -> dict[str, Any]:
    """No rewrite: nothing was flagged, or mitigation is turned off."""
    flagged = any(s.verdict == "hallucinated" for s in state["sentences"])
    status = "disabled" if flagged else "nothing_flagged"
    return {"refined_text": state["response"], "mitigation": Mitigation(status=status)}


def judge(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Score the final text 1-5, and the raw response too when it changed."""
    deps = runtime.context
    refined, calls = judge_agent.judge(
        deps.backend, state["source"], state["refined_text"], deps.settings
    )
    raw = refined
    if state["refined_text"] != state["response"] and deps.settings.judge_raw:
        raw, raw_calls = judge_agent.judge(
            deps.backend, state["source"], state["response"], deps.settings
        )
        calls = calls + raw_calls
    return {"judge_refined": refined, "judge_raw": raw, "calls": calls}

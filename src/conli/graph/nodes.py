"""One small function per CoNLI step; each returns only the state keys it changes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from conli.agents import mitigate as mitigate_agent
from conli.agents.cover import add_points
from conli.agents.nli import Hypothesis
from conli.agents.structured import CallRecord
from conli.calibration import Applied, calibrated_verdict
from conli.detectors import ASKS_NLI, SCORED_BY_LOGPROBS
from conli.detectors.base import DetectionContext, Detector, overruled, reason_for
from conli.detectors.checkers import SpecialisedChecker
from conli.errors import InputTooLargeError
from conli.graph.coverage import coverage_block
from conli.graph.deps import Deps, deps_of
from conli.graph.grounding import chunk_support_rule, swap_rule, unstated_rule
from conli.graph.sources import evidence_of
from conli.graph.state import CheckState
from conli.judges import Provenance, judge_text
from conli.models import (
    Judgement,
    Mitigation,
    ScoreMethod,
    SentenceResult,
    Verdict,
    WordScore,
)
from conli.ner.claims import claim_entities
from conli.ner.grounding import mentions_of
from conli.run.inputs import SourceMap
from conli.signals.lexical import word_scores
from conli.signals.model import ARTIFACT, FUSED_ARTIFACT, QUICK_ARTIFACT, load_model
from conli.text.language import Language, claims_language, language_of_claim
from conli.text.segment import Segment, select_claims, split_response, utf16_offset

if TYPE_CHECKING:  # LangGraph is loaded when a graph is built (graph.build), not before
    from langgraph.runtime import Runtime

Node = Callable[[CheckState, "Runtime[Deps]"], dict[str, Any]]


def split(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Decide the claims' language (the response's, under auto); cut the response in it."""
    deps = deps_of(runtime)
    language = claims_language(deps.settings.language, state["response"], state["source"])
    segments = split_response(state["response"], deps.nlp, language=language)
    limit = deps.settings.max_response_sentences
    if limit is not None and len(segments) > limit:
        raise InputTooLargeError(
            f"the response has {len(segments)} sentences, over the limit of {limit}"
        )
    return {"segments": segments, "language": language}


def select(state: CheckState) -> dict[str, Any]:
    """Mark which segments are claims; the rest pass through unchecked."""
    return {"segments": select_claims(state["segments"])}


def detect(name: str) -> Node:
    """The node that runs detector ``name`` on the response's segments."""

    def node(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
        deps = deps_of(runtime)
        context = DetectionContext(
            source=state["source"],
            response=state["response"],
            question=state.get("question"),
            segments=state["segments"],
            prior=state.get("judgements", {}),
            deps=deps,
            points=state.get("points"),
            language=state.get("language", "en"),
            source_map=state.get("source_map", SourceMap()),
        )
        found = deps.detectors[name].detect(context)
        return {"judgements": found.judgements, "entities": found.entities,
                "point_checks": found.points, "calls": found.calls, "notes": found.notes}

    node.__name__ = node.__qualname__ = name
    node.__doc__ = f"Run the {name} detector."
    return node


def merge(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Combine every detector: a sentence is supported only if every counted check passed.

    A detector's judgement of a sentence does not count where a detector that supersedes
    it judged the same sentence. A claim no detector judged stays unverified. A sentence
    that would pass while a name, number or date of it is one the source never states is
    flagged whatever the detectors said (``grounding.unstated_rule``); with
    ``chunk_support``, so is one whose support is quoted from no source that states it
    (``grounding.chunk_support_rule``); with ``swap_rule``, one with two numbers or names
    in each other's places (``grounding.swap_rule``).
    """
    judgements = state.get("judgements", {})
    entities = state.get("entities", {})
    deps = deps_of(runtime)
    detectors = deps.detectors
    mentions, where = mentions_of(state["source"]), state.get("source_map", SourceMap())
    results = []
    for segment in state["segments"]:
        result = SentenceResult(
            index=segment.index,
            text=segment.text,
            start=segment.start,
            end=segment.end,
            start_utf16=utf16_offset(state["response"], segment.start),
            end_utf16=utf16_offset(state["response"], segment.end),
            checked=segment.checked,
            entities=entities.get(segment.index, []),
        )
        if segment.checked:
            counted = _counted(judgements.get(segment.index, []), detectors)
            result = _merged(result, counted, detectors)
            if deps.calibration is not None:
                result = _calibrated(result, deps.calibration)
            result = unstated_rule(result, mentions)
            if deps.settings.chunk_support:
                result = chunk_support_rule(result, state["source"], mentions, where,
                                            state.get("language", "en"))
            if deps.settings.swap_rule:
                result = swap_rule(result, state["source"], state.get("language", "en"))
            result.evidence = evidence_of(result, state["source"], mentions, where)
        results.append(result)
    return {"sentences": results}


def coverage(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """The coverage block and the word scores (seed 001), from what the detectors found.

    A step of its own, so the time of semantic word scores (forward passes on the model)
    shows as ``coverage``, not as the merge.
    """
    deps = deps_of(runtime)
    supersedes = {name: d.supersedes for name, d in deps.detectors.items()}
    language = state.get("language", "en")
    block = coverage_block(state["source"], state["response"], state.get("points"),
                           state.get("point_checks", []), supersedes, language)
    scores = _word_scores(state["source"], state["response"], deps, language)
    return {"coverage": block, "word_scores": scores}


def _word_scores(source: str, response: str, deps: Deps,
                 language: Language) -> list[WordScore]:
    """The response's content words scored against the source, as ``word_scores`` asks."""
    method = deps.settings.word_scores
    if method == "off":
        return []
    if method == "semantic":
        from conli.signals.align import semantic_word_scores  # numpy, the local extra's

        return semantic_word_scores(deps.backend, source, response, language=language)
    return word_scores(response, source, language)


def _counted(checks: list[Judgement], detectors: Mapping[str, Detector]) -> list[Judgement]:
    """The judgements that decide: those no detector that judged too supersedes."""
    supersedes = {name: d.supersedes for name, d in detectors.items()}
    ignored = overruled({j.detector for j in checks}, supersedes)
    return [j for j in checks if j.detector not in ignored]


def _merged(result: SentenceResult, checks: list[Judgement],
            detectors: Mapping[str, Detector]) -> SentenceResult:
    """The sentence's verdict from its counted checks, each reason worded by its detector."""
    failed = [j for j in checks if j.verdict == "hallucinated"]
    unknown = [j for j in checks if j.verdict == "unverified"]
    verdict: Verdict = (
        "hallucinated" if failed else "unverified" if unknown or not checks else "supported"
    )
    reasons = [reason_for(detectors.get(j.detector), j) for j in (failed or unknown)]
    if not checks:
        reasons = ["could not be checked: no detector judged this sentence"]
    detector = failed[0].detector if failed else None
    score, method = _score_of(checks, verdict)
    return result.model_copy(
        update={
            "verdict": verdict,
            "detector": detector,
            "reasons": reasons,
            "judgements": checks,
            "score": score,
            "score_method": method,
        }
    )


def _score_of(checks: list[Judgement], verdict: Verdict
              ) -> tuple[float | None, ScoreMethod | None]:
    """The lowest scored check's P(entailment) and how it was made; else the verdict's 1 or 0.

    A backend without log-probabilities (or a gateway that drops them) scores nothing: the
    sentence's verdict stands in as 1 or 0, so every checked sentence has a score and says
    what it is worth. An unverified sentence has none.
    """
    scored = [j for j in checks if j.score is not None]
    if scored:
        lowest = min(scored, key=lambda j: j.score or 0.0)
        return lowest.score, _method_of(lowest)
    if verdict == "unverified":
        return None, None
    return (1.0 if verdict == "supported" else 0.0), "verdict"


def _method_of(judgement: Judgement) -> ScoreMethod:
    """A detector's own probability (a trained classifier, a plugin), looks, or logprobs."""
    if judgement.features or judgement.detector not in SCORED_BY_LOGPROBS:
        return "classifier"
    if judgement.looks and all(look.score is None for look in judgement.looks):
        return "looks"
    return "logprobs"


def _calibrated(result: SentenceResult, applied: Applied) -> SentenceResult:
    """The verdict a threshold calibration gives the sentence's score.

    A sentence that could not be checked, or has no score, keeps its verdict; one the cut
    flags that no detector flagged says so as its reason.
    """
    flag_at = applied.calibration.flag_at
    if flag_at is None or result.verdict == "unverified":
        return result
    verdict = calibrated_verdict(result.score, flag_at)
    if verdict is None or verdict == result.verdict:
        return result
    if verdict == "supported":
        return result.model_copy(update={"verdict": verdict, "detector": None, "reasons": []})
    assert result.score is not None
    reason = (f"P(unsupported) = {1 - result.score:.2f} is at or above the calibrated cut "
              f"{flag_at:.2f} ({applied.use.file})")
    return result.model_copy(update={"verdict": verdict, "reasons": [reason],
                                     "detector": "calibration"})


def mitigate(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Rewrite or remove the hallucinated sentences; leave the rest byte-identical."""
    deps = deps_of(runtime)
    mentions = mentions_of(state["source"])

    def unstated(text: str) -> list[str]:
        """The rewrite's words the source never states: its values, its names where read."""
        read_in = language_of_claim(text, deps.settings.language, state.get("language", "en"))
        claim = claim_entities(text, deps.ner, deps.settings.ner, read_in)
        return [f'"{e.text}"' for e in mentions.unstated(claim.entities)]

    refined, mitigation, calls = mitigate_agent.mitigate(
        deps.backend, state["source"], state["response"], state["sentences"], deps.settings,
        question=state.get("question"), verify=_own_verifier(deps, state), unstated=unstated,
    )
    return {"refined_text": refined, "mitigation": mitigation, "calls": calls}


def _own_verifier(deps: Deps, state: CheckState) -> mitigate_agent.Verifier | None:
    """The check's specialised checker as the rewrites' judge, when it runs no NLI.

    ``--detector minicheck`` verifies a rewrite with MiniCheck, not with NLI on ``--llm``;
    a check that runs NLI verifies with NLI, as before.
    """
    if ASKS_NLI & set(deps.detectors):
        return None
    checker = next((d for d in deps.detectors.values() if isinstance(d, SpecialisedChecker)),
                   None)
    if checker is None:
        return None

    def verify(hypotheses: list[Hypothesis]) -> tuple[list[Judgement], list[CallRecord]]:
        segments = [Segment(h.sentence, h.text, 0, len(h.text), True) for h in hypotheses]
        context = DetectionContext(source=state["source"], response=state["response"],
                                   question=state.get("question"), segments=segments,
                                   prior={}, deps=deps, language=state.get("language", "en"),
                                   source_map=state.get("source_map", SourceMap()))
        found = checker.detect(context)
        judged = [found.judgements[h.sentence][0] for h in hypotheses]
        return judged, [replace(c, step="verify_rewrite") for c in found.calls]

    return verify


def fix_coverage(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Add one checked sentence for each point the response does not cover."""
    deps = deps_of(runtime)
    coverage = state.get("coverage")
    uncovered = [p for p in coverage.points if p.verdict == "uncovered"] if coverage else []
    text, additions, calls = add_points(deps.backend, state["source"], state["refined_text"],
                                        uncovered, deps.settings, question=state.get("question"))
    mitigation = state.get("mitigation") or Mitigation(status="nothing_flagged")
    update: dict[str, Any] = {"added": additions}
    if mitigation.status in ("disabled", "nothing_flagged") and any(a.added for a in additions):
        update["status"] = "rewritten"  # the text did change: by the additions
    return {"refined_text": text, "mitigation": mitigation.model_copy(update=update),
            "calls": calls}


def keep(state: CheckState) -> dict[str, Any]:
    """No rewrite: nothing was flagged, or mitigation is turned off."""
    flagged = any(s.verdict == "hallucinated" for s in state["sentences"])
    status = "disabled" if flagged else "nothing_flagged"
    return {"refined_text": state["response"], "mitigation": Mitigation(status=status)}


def raw_judge(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Score the raw response from detection's verdicts, beside the rewrite (see ``judge``)."""
    deps = deps_of(runtime)
    raw, calls = judge_text(deps.backend, state["source"], state["response"],
                            state["sentences"], deps.settings, provenance(deps))
    return {"judge_raw": raw, "calls": calls}


def judge(state: CheckState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Score the final text 1-5 in the configured mode, and the raw response when it changed.

    The refined text's verdicts come from its unchanged sentences and checked rewrites; a
    text the rewrite emptied is ``emptied``, never a 5 (``conli.judges``). The raw
    response's score may already be there (``raw_judge`` ran beside the rewrite): it is
    not asked for again, and stands for the refined text too if the rewrite left it as it was.
    """
    deps = deps_of(runtime)
    made_by = provenance(deps)
    changed = state["refined_text"] != state["response"]
    raw = state.get("judge_raw")
    if raw is not None and not changed:
        return {"judge_refined": raw}
    refined_sentences = refined_verdicts(state["sentences"], state.get("mitigation"))
    refined, calls = judge_text(deps.backend, state["source"], state["refined_text"],
                                refined_sentences, deps.settings, made_by)
    if raw is not None:
        return {"judge_refined": refined, "calls": calls}
    raw = refined
    if changed and deps.settings.judge_raw:
        raw, raw_calls = judge_text(deps.backend, state["source"], state["response"],
                                    state["sentences"], deps.settings, made_by)
        calls = calls + raw_calls
    return {"judge_refined": refined, "judge_raw": raw, "calls": calls}


def provenance(deps: Deps) -> Provenance:
    """What a score is made with, for its audit record: backend, detectors, artifacts."""
    settings = deps.settings
    artifacts: dict[str, str] = {}
    if "fused" in deps.detectors:
        artifacts["fused"] = load_model(settings.fused_model or FUSED_ARTIFACT).version
    if "signals" in deps.detectors:
        artifacts["signals"] = load_model(settings.signal_model or ARTIFACT).version
    if "quick" in deps.detectors:
        artifacts["quick"] = load_model(QUICK_ARTIFACT).version
    if deps.calibration is not None:
        use = deps.calibration.use
        artifacts["calibration"] = f"{use.file} (sha256 {use.sha256[:12]})"
    return Provenance(backend=deps.backend.name, model=deps.backend.model,
                      detectors=list(deps.detectors), artifacts=artifacts,
                      nli_prompt=settings.nli_prompt)


def refined_verdicts(
    sentences: list[SentenceResult], mitigation: Mitigation | None
) -> list[SentenceResult]:
    """The sentences of the refined text with what is known of each.

    Untouched sentences keep their verdicts; a rewrite carries the verdict of its re-check
    (unverified if it was not re-checked); a removed sentence is gone.
    """
    changes = {c.index: c for c in (mitigation.changes if mitigation else [])}
    out = []
    for sentence in sentences:
        change = changes.get(sentence.index)
        if change is None:
            out.append(sentence)
        elif change.action == "rewrite":
            verdict = change.rewrite_verdict or "unverified"
            out.append(sentence.model_copy(update={
                "text": change.after, "verdict": verdict, "judgements": [], "score": None,
                "evidence": [],
                "reasons": [] if verdict == "supported" else [change.note or "not re-checked"],
            }))
    added = [a for a in (mitigation.added if mitigation else []) if a.added]
    for number, addition in enumerate(added, start=len(sentences)):  # checked before adding
        out.append(SentenceResult(index=number, text=addition.sentence, start=0, end=0,
                                  checked=True, verdict=addition.verdict))
    return out

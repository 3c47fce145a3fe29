"""The detection agent: chain-of-thought NLI over numbered hypotheses, in batches.

Each batch is one prompt: static rules and examples, then the source, then the batch's
hypotheses. Entailment is ``supported``; contradiction and neutral are ``hallucinated``;
a batch that errors or never validates leaves its hypotheses ``unverified``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pydantic import BaseModel

from conli.agents.scoring import TOP_ALTERNATIVES, label_scores, score_hypothesis
from conli.agents.structured import Asked, CallRecord, ask_structured, exact_items_schema
from conli.backends.base import Backend, Message, PrimesPrefix
from conli.config import Settings
from conli.models import (
    Entity,
    Judgement,
    Level,
    NLIAnswer,
    NLIClaimAnswer,
    NLIClaimLabelAnswer,
    NLIItem,
    NLILabel,
    NLILabelOnly,
    NLILabelOnlyAnswer,
    NLIReasonedAnswer,
    NLIReasonedItem,
    Verdict,
)
from conli.ner.grounding import SourceMentions
from conli.prompts import render
from conli.run_context import propagate, report
from conli.windows import windows_for

TOKENS_PER_HYPOTHESIS = {True: 320, False: 24}  # answer tokens allowed per hypothesis
HYPOTHESIS_TOKENS = 120  # room for one claim (a long sentence, tagged) in the prompt
NLI_PROMPT_TOKENS = 1100  # rules, worked examples and framing around source and claims
NLIAnswers = (
    NLIAnswer | NLIReasonedAnswer | NLILabelOnlyAnswer | NLIClaimAnswer | NLIClaimLabelAnswer
)


@dataclass(frozen=True)
class Hypothesis:
    """What the model judges: a sentence, or a sentence with one entity tagged."""

    sentence: int
    text: str
    entity: Entity | None = None


def label_to_verdict(label: NLILabel) -> Verdict:
    """The paper's rule: only entailment is grounded; contradiction and neutral are not."""
    return "supported" if label == "entailment" else "hallucinated"


def _verdict(label: NLILabel, evidence: str | None) -> Verdict:
    """``label_to_verdict``, except that an entailment quoting nothing is not a pass.

    ``evidence`` is None for prompts that do not ask for a quote. A quote that is not in
    the source is recorded (``evidence_in_source``) but does not change the verdict:
    on the 800 dev examples that rule cost 3.3 points of balanced accuracy.
    """
    if label == "entailment" and evidence is not None and not evidence.strip():
        return "hallucinated"
    return label_to_verdict(label)


def tag_entity(sentence: str, start: int, end: int) -> str:
    """Mark ``sentence[start:end]`` as ``[ entity ]`` for the entity-level prompt."""
    return f"{sentence[:start]}[ {sentence[start:end]} ]{sentence[end:]}"


def judge_hypotheses(
    backend: Backend,
    source: str,
    hypotheses: list[Hypothesis],
    *,
    level: Level,
    settings: Settings,
) -> tuple[list[Judgement], list[CallRecord]]:
    """Judge every hypothesis; the result is in input order, one judgement each.

    A source too long for the context is judged window by window (every hypothesis against
    one window before the next, so each window's prefix is prefilled once); a hypothesis
    keeps its best-supported window's judgement (``best_supported``).
    """
    settings = resolve_prompt(settings, backend)
    windows = nli_windows(backend, source, settings) if hypotheses else [source]
    if len(windows) == 1:
        return _judge_in(backend, source, hypotheses, level=level, settings=settings)
    per_window: list[list[Judgement]] = []
    calls: list[CallRecord] = []
    for number, window in enumerate(windows):
        judged, window_calls = _judge_in(backend, window, hypotheses, level=level,
                                         settings=settings)
        per_window.append([j.model_copy(update={"source_window": number}) for j in judged])
        calls += window_calls
    return [best_supported(list(js)) for js in zip(*per_window, strict=True)], calls


def nli_windows(backend: Backend, source: str, settings: Settings) -> list[str]:
    """The source windows NLI calls use (one: the whole source, when it fits)."""
    batch = batch_size(backend, settings)
    per_hypothesis = TOKENS_PER_HYPOTHESIS[settings.chain_of_thought] + HYPOTHESIS_TOKENS
    return windows_for(backend, source, NLI_PROMPT_TOKENS + batch * per_hypothesis)


def resolve_prompt(settings: Settings, backend: Backend) -> Settings:
    """``settings`` with an ``auto`` NLI prompt made concrete for ``backend``.

    v3 where calls hold one hypothesis (the embedded model): v1's batch wrapper would be
    prefilled on every call for nothing. v1 elsewhere, whose batches let hosted models
    judge several hypotheses per call.
    """
    if settings.nli_prompt != "auto":
        return settings
    one = (settings.hypotheses_per_call or backend.hypotheses_per_call) == 1
    return settings.model_copy(update={"nli_prompt": "v3" if one else "v1"})


def batch_size(backend: Backend, settings: Settings) -> int:
    """Hypotheses per NLI call: the v3 prompt takes one; else settings, else the backend's."""
    if settings.nli_prompt == "v3":
        return 1
    return settings.hypotheses_per_call or backend.hypotheses_per_call


def best_supported(judgements: list[Judgement]) -> Judgement:
    """One hypothesis's judgement over all windows (never fails open).

    Supported if any window entails it (the most confident such window); else unverified
    if any window could not be checked; else a window's contradiction; else neutral.
    """

    def score(j: Judgement) -> float:
        return j.score if j.score is not None else 0.0

    for verdict in ("supported", "unverified"):
        matching = [j for j in judgements if j.verdict == verdict]
        if matching:
            return max(matching, key=score)
    contradicted = [j for j in judgements if j.label == "contradiction"]
    return min(contradicted or judgements, key=score)


def _judge_in(
    backend: Backend,
    source: str,
    hypotheses: list[Hypothesis],
    *,
    level: Level,
    settings: Settings,
) -> tuple[list[Judgement], list[CallRecord]]:
    """Judge every hypothesis against one source (or window), in input order.

    With ``score_first`` (and a backend that can), each hypothesis is first scored from
    its label token; only those below the threshold get chain-of-thought reasoning, which
    then decides their verdict, its score and the mitigation agent's reasons.
    """
    workers = max(1, backend.max_concurrency)
    scores: list[float | None] = [None] * len(hypotheses)
    calls: list[CallRecord] = []
    if settings.score_first and backend.scores_labels:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            def score(h: Hypothesis) -> tuple[float | None, list[CallRecord]]:
                return score_hypothesis(backend, source, h.text, level, settings)

            scored = list(pool.map(propagate(score), hypotheses))
        scores = [score for score, _ in scored]
        calls = [c for _, score_calls in scored for c in score_calls]
    passed = {
        i for i, s in enumerate(scores) if s is not None and s >= settings.entailment_threshold
    }
    to_reason = [h for i, h in enumerate(hypotheses) if i not in passed]
    size = batch_size(backend, settings)
    batches = [to_reason[i : i + size] for i in range(0, len(to_reason), size)]
    done = [0]
    lock = threading.Lock()

    def judge_batch(batch: list[Hypothesis]) -> tuple[list[Judgement], list[CallRecord]]:
        judged = _judge_batch(backend, source, batch, level, settings)
        with lock:
            done[0] += len(batch)
            report(f"nli_{level}", done[0], len(to_reason))
        return judged

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(propagate(judge_batch), batches))
    reasoned = iter(j for batch_judgements, _ in results for j in batch_judgements)
    calls += [c for _, batch_calls in results for c in batch_calls]
    judgements = [
        _passed_by_score(h, level, score, settings) if i in passed else next(reasoned)
        for i, (h, score) in enumerate(zip(hypotheses, scores, strict=True))
    ]
    return judgements, calls


def warm_up(backend: Backend, settings: Settings) -> float:
    """Ready the NLI prompts' static prefix on backends that keep it; return seconds taken.

    The embedded backend restores it from disk (or prefills and saves it once), so the
    first response of a process prefills only its own text. Others: nothing to do.
    """
    if not isinstance(backend, PrimesPrefix):
        return 0.0
    return backend.prime(static_prefix(resolve_prompt(settings, backend)))


def static_prefix(settings: Settings) -> list[Message]:
    """The NLI prompts' static part (rules, worked examples), shared by every call."""
    template = nli_template("sentence", settings)
    return render(template, source="", hypotheses=[], cot=settings.chain_of_thought).messages


def nli_template(level: Level, settings: Settings) -> str:
    """The versioned NLI template for ``level`` that ``settings`` choose."""
    return f"nli_{level}.{settings.nli_prompt}"


def _answer_model(settings: Settings) -> tuple[type[NLIAnswers], str | None]:
    """The answer model (and its item's schema name, None for one-claim answers)."""
    if settings.nli_prompt == "v3":
        return (NLIClaimAnswer if settings.chain_of_thought else NLIClaimLabelAnswer), None
    if not settings.chain_of_thought:
        return NLILabelOnlyAnswer, "NLILabelOnly"
    if settings.nli_prompt == "v2":
        return NLIReasonedAnswer, "NLIReasonedItem"
    return NLIAnswer, "NLIItem"


def _passed_by_score(
    hypothesis: Hypothesis, level: Level, score: float | None, settings: Settings
) -> Judgement:
    return Judgement(
        level=level,
        hypothesis=hypothesis.text,
        verdict="supported",
        label="entailment",
        reasoning=f"P(entailment) = {score:.2f} from the label token",
        entity=hypothesis.entity,
        score=score,
        template=nli_template(level, settings),
    )


def _judge_batch(
    backend: Backend,
    source: str,
    batch: list[Hypothesis],
    level: Level,
    settings: Settings,
) -> tuple[list[Judgement], list[CallRecord]]:
    """One call for the batch, plus one follow-up call for hypotheses the model skipped."""
    template = nli_template(level, settings)
    answered: dict[int, Judgement] = {}
    calls: list[CallRecord] = []
    pending = list(range(len(batch)))
    error = "the model gave no judgement for this hypothesis"
    mentions = SourceMentions(source)
    for _ in range(2 if settings.max_reasks else 1):
        asked = _ask(backend, source, [batch[i] for i in pending], level, settings, template)
        calls.extend(asked.calls)
        if asked.value is None:
            error = asked.error or error
            break
        items: Sequence[NLIItem | NLIReasonedItem | NLILabelOnly] = asked.value.judgements
        read = label_scores(asked.completion) if asked.completion else []
        item_scores = read if len(read) == len(items) else [None] * len(items)
        for item, score in zip(items, item_scores, strict=True):
            original = pending[item.id]
            evidence = getattr(item, "evidence", None)
            answered[original] = Judgement(
                level=level,
                hypothesis=batch[original].text,
                verdict=_verdict(item.label, evidence),
                label=item.label,
                evidence=evidence or "",
                evidence_in_source=mentions.quotes(evidence) if evidence else None,
                reasoning=getattr(item, "reasoning", ""),
                entity=batch[original].entity,
                score=score,
                template=template,
            )
        pending = [i for i in pending if i not in answered]
        if not pending:
            break
    for i in pending:
        answered[i] = Judgement(
            level=level,
            hypothesis=batch[i].text,
            verdict="unverified",
            entity=batch[i].entity,
            error=error,
            template=template,
        )
    return [answered[i] for i in range(len(batch))], calls


def _ask(
    backend: Backend,
    source: str,
    batch: list[Hypothesis],
    level: Level,
    settings: Settings,
    template: str,
) -> Asked[NLIAnswers]:
    prompt = render(
        template, source=source, hypotheses=[h.text for h in batch], cot=settings.chain_of_thought
    )
    answer_model, item = _answer_model(settings)
    schema = (
        exact_items_schema(answer_model, "judgements", item, list(range(len(batch))))
        if item
        else answer_model.model_json_schema()
    )

    def ids_in_range(answer: BaseModel) -> None:
        ids = [item.id for item in answer.judgements]  # type: ignore[attr-defined]
        if len(set(ids)) != len(ids) or any(i >= len(batch) for i in ids):
            raise ValueError(f"judgement ids must be distinct and between 0 and {len(batch) - 1}")
        if not ids:
            raise ValueError("no judgements given")

    return ask_structured(
        backend,
        prompt.messages,
        answer_model,
        step=f"nli_{level}",
        template=template,
        max_tokens=64 + TOKENS_PER_HYPOTHESIS[settings.chain_of_thought] * len(batch),
        max_reasks=settings.max_reasks,
        temperature=settings.temperature,
        check=ids_in_range,
        schema=schema,
        top_logprobs=TOP_ALTERNATIVES if backend.scores_labels else 0,
    )

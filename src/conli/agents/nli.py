"""The NLI agent: chain-of-thought NLI over claims, one or a numbered batch per call.

Each call is one prompt: static rules and examples, then the source, then the claims.
Entailment is ``supported``; contradiction and neutral are ``hallucinated``; a call whose
answer never validates leaves its claims ``unverified``. Which prompt version, answer
shape and batch size apply comes from ``nli_prompts``; ``settings.nli_prompt`` must already
be concrete (resolved once per run by the pipeline).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from conli.agents.answers import NLIItem, NLILabelOnly, NLIReasonedItem
from conli.agents.evidence import group_by_focus
from conli.agents.looks import combine_looks
from conli.agents.nli_prompts import Kind, NLIPrompt, batch_size, nli_prompt
from conli.agents.scoring import TOP_ALTERNATIVES, label_scores, score_hypothesis
from conli.agents.structured import Asked, CallRecord, ask_structured, exact_items_schema
from conli.agents.windows import windows_for
from conli.backends.base import Backend, Message, primes_prefix
from conli.config import Language, Settings
from conli.models import Entity, Judgement, NLILabel, Verdict
from conli.ner.grounding import SourceMentions, mentions_of, normalize
from conli.prompts import render
from conli.prompts.boundary import TrustedData, defuse
from conli.prompts.spotlight import versioned
from conli.run.context import propagate, report
from conli.text.language import language_of

TOKENS_PER_HYPOTHESIS = {True: 320, False: 24}  # answer tokens allowed per hypothesis
HYPOTHESIS_TOKENS = 120  # room for one claim (a long sentence, tagged) in the prompt
NLI_PROMPT_TOKENS = 1100  # rules, worked examples and framing around source and claims


@dataclass(frozen=True)
class Hypothesis:
    """What the model judges: a sentence, or a sentence with one entity tagged."""

    sentence: int
    text: str
    entity: Entity | None = None


def label_to_verdict(label: NLILabel) -> Verdict:
    """The paper's rule: only entailment is grounded; contradiction and neutral are not."""
    return "supported" if label == "entailment" else "hallucinated"


# nli_unquoted rejudge: the claim's judgement after a re-ask still rested on an absent quote
UNQUOTED = ("the model called it entailment on evidence that cannot carry it (not in the "
            "source, or without the detail the source does not state), and asked again it "
            "still did: the claim is not verified")


def _verdict(label: NLILabel, evidence: str | None) -> Verdict:
    """``label_to_verdict``, except that an entailment quoting nothing is not a pass.

    ``evidence`` is None for prompts that do not ask for a quote. A quote that is not in
    the source is recorded (``evidence_in_source``) but does not change the verdict:
    on the 800 dev examples that rule cost 3.3 points of balanced accuracy
    (``nli_unquoted`` rejudge asks once more instead, and leaves the claim unverified).
    """
    if label == "entailment" and evidence is not None and not evidence.strip():
        return "hallucinated"
    return label_to_verdict(label)


def unsupported_quote(item: Any, hypothesis: Hypothesis, mentions: SourceMentions
                      ) -> str | None:
    """Why an entailment's quote cannot carry it, or None: nothing to doubt.

    Its evidence is not in the source; or, at the entity level, the quote does not hold the
    tagged entity, which the source itself never states (a changed number, date or name
    "entailed" by the source's own, different one).
    """
    evidence = getattr(item, "evidence", None)
    if item.label != "entailment" or not evidence:
        return None
    if not mentions.quotes(evidence):
        return "its evidence is not in the source"
    entity = hypothesis.entity
    if entity is not None and not mentions.mentions(entity.text) \
            and normalize(entity.text) not in normalize(evidence):
        return f"its evidence does not contain {entity.text!r}, which the source does not state"
    return None


def tag_entity(sentence: str, start: int, end: int) -> TrustedData:
    """Mark ``sentence[start:end]`` as ``[ entity ]`` for the entity-level prompt.

    The sentence is caller text: it is defused whole (which keeps offsets), so only our
    own tag reads as one, and the result is ``TrustedData`` for ``render`` to pass as is
    (datamarked, as all data is, when the prompt is spotlit).
    """
    text = defuse(sentence, brackets=True)
    return TrustedData(f"{text[:start]}[ {text[start:end]} ]{text[end:]}")


def run_nli(
    backend: Backend,
    source: str,
    hypotheses: list[Hypothesis],
    *,
    kind: Kind,
    settings: Settings,
    detector: str | None = None,
    question: str | None = None,
) -> tuple[list[Judgement], list[CallRecord]]:
    """Judge every hypothesis; the result is in input order, one judgement each.

    A source too long for the context is judged window by window (every hypothesis against
    one window before the next, so each window's prefix is prefilled once); a hypothesis
    keeps its best-supported window's judgement (``best_supported``). Judgements name
    ``detector`` (default ``<kind>_nli``); ``question``, if the response answers one, is
    shown with the claims.
    """
    call = _Call(backend, kind, settings, detector or f"{kind}_nli", question)
    if settings.nli_evidence == "focus" and hypotheses:
        return _judge_focused(call, source, hypotheses, settings.nli_focus_sentences,
                              language_of(settings.language, source))
    windows = nli_windows(backend, source, settings) if hypotheses else [source]
    if len(windows) == 1:
        return call.judge_all(source, hypotheses)
    per_window: list[list[Judgement]] = []
    calls: list[CallRecord] = []
    for number, window in enumerate(windows):
        judged, window_calls = call.judge_all(window, hypotheses)
        per_window.append([j.model_copy(update={"source_window": number}) for j in judged])
        calls += window_calls
    return [best_supported(list(js)) for js in zip(*per_window, strict=True)], calls


def _judge_focused(call: _Call, source: str, hypotheses: list[Hypothesis], sentences: int,
                   language: Language) -> tuple[list[Judgement], list[CallRecord]]:
    """Judge each hypothesis against its focused source (``agents.evidence``), in input order.

    Claims that focus on the same sentences share their calls' prompt (and its cache).
    """
    judged: dict[int, Judgement] = {}
    calls: list[CallRecord] = []
    for focus, positions in group_by_focus(source, [h.text for h in hypotheses], sentences,
                                           language).items():
        found, made = call.judge_all(focus, [hypotheses[i] for i in positions])
        judged.update(zip(positions, found, strict=True))
        calls += made
    return [judged[i] for i in range(len(hypotheses))], calls


def nli_windows(backend: Backend, source: str, settings: Settings) -> list[str]:
    """The source windows NLI calls use (one: the whole source, when it fits)."""
    batch = batch_size(settings, backend.capabilities)
    per_hypothesis = TOKENS_PER_HYPOTHESIS[settings.chain_of_thought] + HYPOTHESIS_TOKENS
    return windows_for(backend, source, NLI_PROMPT_TOKENS + batch * per_hypothesis,
                       settings.language)


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


def warm_up(backend: Backend, settings: Settings) -> float:
    """Ready the NLI prompts' static prefix on backends that keep it; return seconds taken.

    The embedded backend restores it from disk (or prefills and saves it once), so the
    first response of a process prefills only its own text. Others: nothing to do.
    """
    primer = primes_prefix(backend)
    if primer is None:
        return 0.0
    return primer.prime(static_prefix(settings))


def static_prefix(settings: Settings) -> list[Message]:
    """The NLI prompts' static part (rules, worked examples), shared by every call."""
    template = nli_prompt(settings.nli_prompt).template("sentence")
    return render(template, source="", hypotheses=[], cot=settings.chain_of_thought,
                  spotlight=settings.spotlight).messages


class _Call:
    """The NLI calls of one kind for one run: prompt record, backend and settings fixed."""

    def __init__(
        self, backend: Backend, kind: Kind, settings: Settings, detector: str,
        question: str | None,
    ) -> None:
        self.backend, self.kind, self.settings, self.detector = backend, kind, settings, detector
        self.question = question
        self.prompt: NLIPrompt = nli_prompt(settings.nli_prompt)
        self.template = self.prompt.template(kind)  # what is rendered
        self.recorded = versioned(self.template, settings.spotlight)  # what results record

    def judge_all(
        self, source: str, hypotheses: list[Hypothesis]
    ) -> tuple[list[Judgement], list[CallRecord]]:
        """Judge every hypothesis against one source (or window), in input order.

        With ``score_first`` (and a backend that can), each hypothesis is first scored
        from its label token; only those below the threshold get chain-of-thought
        reasoning, which then decides their verdict, score and the editor's reasons.
        """
        capabilities = self.backend.capabilities
        workers = max(1, capabilities.max_concurrency)
        scores: list[float | None] = [None] * len(hypotheses)
        calls: list[CallRecord] = []
        if self.settings.score_first and capabilities.scores_labels:
            def score(h: Hypothesis) -> tuple[float | None, list[CallRecord]]:
                return score_hypothesis(self.backend, source, h.text, self.template,
                                        self.prompt.label_opening, self.settings,
                                        question=self.question)

            with ThreadPoolExecutor(max_workers=workers) as pool:
                scored = list(pool.map(propagate(score), hypotheses))
            scores = [s for s, _ in scored]
            calls = [c for _, score_calls in scored for c in score_calls]
        threshold = self.settings.entailment_threshold
        passed = {i for i, s in enumerate(scores) if s is not None and s >= threshold}
        to_reason = [h for i, h in enumerate(hypotheses) if i not in passed]
        size = batch_size(self.settings, capabilities)
        batches = [to_reason[i : i + size] for i in range(0, len(to_reason), size)]
        done = [0]
        lock = threading.Lock()

        def judge_batch(batch: list[Hypothesis]) -> tuple[list[Judgement], list[CallRecord]]:
            judged = self.judge_batch(source, batch)
            with lock:
                done[0] += len(batch)
                report(self.detector, done[0], len(to_reason))
            return judged

        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(propagate(judge_batch), batches))
        reasoned = iter(j for batch_judgements, _ in results for j in batch_judgements)
        calls += [c for _, batch_calls in results for c in batch_calls]
        judgements = [
            self.passed_by_score(h, s) if i in passed else next(reasoned)
            for i, (h, s) in enumerate(zip(hypotheses, scores, strict=True))
        ]
        return judgements, calls

    def passed_by_score(self, hypothesis: Hypothesis, score: float | None) -> Judgement:
        return Judgement(
            detector=self.detector,
            hypothesis=hypothesis.text,
            verdict="supported",
            label="entailment",
            reasoning=f"P(entailment) = {score:.2f} from the label token",
            entity=hypothesis.entity,
            score=score,
            template=self.recorded,
        )

    def judge_batch(
        self, source: str, batch: list[Hypothesis]
    ) -> tuple[list[Judgement], list[CallRecord]]:
        """The batch's judgements: one look, or ``nli_looks`` combined (``agents.looks``).

        With ``nli_looks_on = "flagged"`` only the claims the first look does not pass are
        looked at again; the others keep their one look.
        """
        first, calls = self.look(source, batch)
        looks = self.settings.nli_looks
        again = [i for i, j in enumerate(first)
                 if self.settings.nli_looks_on == "every" or j.verdict != "supported"]
        if looks == 1 or not again:
            return first, calls
        per_claim = {i: [first[i]] for i in again}
        for number in range(1, looks):  # sampled looks, each with its own seed
            judged, made = self.look(source, [batch[i] for i in again],
                                     temperature=self.settings.nli_look_temperature,
                                     seed=number)
            for i, judgement in zip(again, judged, strict=True):
                per_claim[i].append(judgement)
            calls += made
        return [combine_looks(per_claim[i]) if i in per_claim else j
                for i, j in enumerate(first)], calls

    def look(
        self, source: str, batch: list[Hypothesis], *, temperature: float | None = None,
        seed: int | None = None,
    ) -> tuple[list[Judgement], list[CallRecord]]:
        """One call for the batch, plus one follow-up call for hypotheses it skipped.

        ``temperature`` defaults to the settings'; ``seed`` is passed on for sampled looks.
        """
        answered: dict[int, Judgement] = {}
        calls: list[CallRecord] = []
        pending = list(range(len(batch)))
        error = "the model gave no judgement for this hypothesis"
        mentions = mentions_of(source)
        for _ in range(2 if self.settings.max_reasks else 1):
            asked_for = [batch[i] for i in pending]
            asked = self.ask(source, asked_for, temperature, seed,
                             doubt=self._doubt(mentions, asked_for) if self.rejudges else None)
            calls.extend(asked.calls)
            if asked.value is None:
                error = asked.error or error
                break
            items: Sequence[NLIItem | NLIReasonedItem | NLILabelOnly] = (
                asked.value.judgements  # type: ignore[attr-defined]
            )
            read = label_scores(asked.completion) if asked.completion else []
            item_scores = read if len(read) == len(items) else [None] * len(items)
            for item, score in zip(items, item_scores, strict=True):
                original = pending[item.id]
                evidence = getattr(item, "evidence", None)
                quoted = mentions.quotes(evidence) if evidence else None
                unquoted = self.rejudges and bool(
                    unsupported_quote(item, batch[original], mentions))
                answered[original] = Judgement(
                    detector=self.detector,
                    hypothesis=batch[original].text,
                    verdict="unverified" if unquoted else _verdict(item.label, evidence),
                    label=item.label,
                    evidence=evidence or "",
                    evidence_in_source=quoted,
                    reasoning=getattr(item, "reasoning", ""),
                    entity=batch[original].entity,
                    error=UNQUOTED if unquoted else None,
                    score=score,
                    template=self.recorded,
                )
            pending = [i for i in pending if i not in answered]
            if not pending:
                break
        for i in pending:
            answered[i] = Judgement(
                detector=self.detector,
                hypothesis=batch[i].text,
                verdict="unverified",
                entity=batch[i].entity,
                error=error,
                template=self.recorded,
            )
        return [answered[i] for i in range(len(batch))], calls

    @property
    def rejudges(self) -> bool:
        """``nli_unquoted`` rejudge, where the prompt asks for a quote to check."""
        return self.settings.nli_unquoted == "rejudge" and self.prompt.quotes_evidence

    @staticmethod
    def _doubt(mentions: SourceMentions, asked: list[Hypothesis]
               ) -> Callable[[BaseModel], str | None]:
        """The doubt worth a re-ask: an entailment resting on words the source lacks."""

        def doubt(answer: BaseModel) -> str | None:
            for item in answer.judgements:  # type: ignore[attr-defined]
                problem = unsupported_quote(item, asked[item.id], mentions)
                if problem:
                    return (f"judgement {item.id} says entailment, but {problem}. Quote the "
                            "source's own words that state it, or choose neutral if the "
                            "source does not state it")
            return None

        return doubt

    def ask(self, source: str, batch: list[Hypothesis], temperature: float | None = None,
            seed: int | None = None, *, doubt: Callable[[BaseModel], str | None] | None = None,
            ) -> Asked[BaseModel]:
        cot = self.settings.chain_of_thought
        prompt = render(
            self.template, source=source, hypotheses=[h.text for h in batch], cot=cot,
            question=self.question, spotlight=self.settings.spotlight,
        )
        answer_model, item = self.prompt.answer(cot)
        schema = (
            exact_items_schema(answer_model, "judgements", item, list(range(len(batch))))
            if item
            else answer_model.model_json_schema()
        )

        def ids_in_range(answer: BaseModel) -> None:
            ids = [item.id for item in answer.judgements]  # type: ignore[attr-defined]
            if len(set(ids)) != len(ids) or any(i >= len(batch) for i in ids):
                raise ValueError(
                    f"judgement ids must be distinct and between 0 and {len(batch) - 1}"
                )
            if not ids:
                raise ValueError("no judgements given")

        return ask_structured(
            self.backend,
            prompt.messages,
            answer_model,
            step=self.detector,
            template=self.recorded,
            max_tokens=64 + TOKENS_PER_HYPOTHESIS[cot] * len(batch),
            max_reasks=self.settings.max_reasks,
            temperature=self.settings.temperature if temperature is None else temperature,
            seed=seed,
            check=ids_in_range,
            schema=schema,
            top_logprobs=TOP_ALTERNATIVES if self.backend.capabilities.logprobs else 0,
            doubt=doubt,
        )

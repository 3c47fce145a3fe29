"""Faithful generation (seed 002): a per-sentence monitor and FOD, its Algorithm 1.

The monitor scores each sentence as soon as it is complete: P(entailment) of the sentence
given the source, read from the label token of the chain-of-thought NLI judgement (the
label-only answer is not used: on the embedded model its constrained first token is
degenerate and reads every claim as a contradiction). The trained ``fused`` detector would
need a forward pass over the whole source for every candidate sentence, too slow to steer
decoding on a CPU.

FOD: greedy decoding until a sentence scores below ``fod_backtrack`` (tau1); then, from
the sentences before it, a sentence-level beam search: each of ``fod_beams`` (K) beams
samples ``fod_samples`` (S) next sentences, samples below ``fod_prune`` (tau2) are pruned,
and the K beams with the best mean score go on until one ends. A partial answer's score
is the mean of its sentences'. The baselines of seed 002's Table 2 run on the same parts:
greedy, abstention, reranking of S x K samples, and backtracking without the search.

Greedy decoding is deterministic, so the greedy answer is generated in one call and cut
into sentences: the same sentences as decoding one at a time, with one prefill of the
source instead of one per sentence. Samples of a step are drawn together, then scored
together, for the same reason (the embedded server caches one prompt prefix at a time).

Every model call, the decoder's and the monitor's, goes through ``backends.calls``: no
call starts past the check's deadline (``check_deadline_seconds``, one per generation),
transient errors are retried, and the result carries their usage as a check's does.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import mean
from typing import Literal

from pydantic import BaseModel, Field

from conli.agents.nli import Hypothesis, run_nli
from conli.agents.nli_prompts import resolve
from conli.backends import get_backend
from conli.backends.base import Backend, Completion, CompletionRequest, Message
from conli.backends.calls import CallRecord, call_model, usage_by_step, usage_of
from conli.config import Settings
from conli.errors import BackendError, ConfigError, InputError
from conli.models import UsageTotals
from conli.prompts import render
from conli.run.context import scope
from conli.run.inputs import validate_text

TEMPLATE = "generate_answer.v1"
Method = Literal["greedy", "abstain", "rerank", "backtrack", "fod"]
METHODS: tuple[Method, ...] = ("greedy", "abstain", "rerank", "backtrack", "fod")
ABSTAINED = "No answer that the source supports could be generated."


class GeneratedSentence(BaseModel):
    """One sentence of the answer, its monitor score, and how it was chosen."""

    text: str
    score: float = Field(ge=0.0, le=1.0)
    origin: Literal["greedy", "beam", "sample"]


class Generation(BaseModel):
    """An answer produced by one method, sentence by sentence."""

    method: Method
    sentences: list[GeneratedSentence]
    text: str
    abstained: bool = False
    message: str | None = None
    backtracked_at: int | None = Field(default=None, description="the greedy sentence that failed")
    samples: int = Field(default=0, description="sentences sampled by the search, or whole answers "
                         "sampled for reranking")
    seconds: float = 0.0
    template: str = TEMPLATE
    backend: str | None = Field(
        default=None, description="the backend that generated and scored it")
    model: str | None = None
    usage: UsageTotals = Field(default_factory=UsageTotals,
                               description="every model call: the decoder's and the monitor's")
    usage_by_step: dict[str, UsageTotals] = Field(default_factory=dict)

    @property
    def faithfulness(self) -> float | None:
        """The mean monitor score of the answer (None when it is empty)."""
        return mean(s.score for s in self.sentences) if self.sentences else None


Splitter = Callable[[str], list[str]]
OnSentence = Callable[[GeneratedSentence], None]


@dataclass
class _Beam:
    sentences: list[GeneratedSentence] = field(default_factory=list)
    ended: bool = False

    @property
    def score(self) -> float:
        return mean(s.score for s in self.sentences) if self.sentences else 0.0


class Monitor:
    """P(entailment) of each sentence given the source, cached by sentence text."""

    def __init__(self, backend: Backend, source: str, question: str | None,
                 settings: Settings) -> None:
        self.backend, self.source, self.question = backend, source, question
        self.settings = resolve(settings, backend)
        self.cache: dict[str, float] = {}
        self.calls: list[CallRecord] = []

    def scores(self, sentences: Sequence[str]) -> list[float]:
        """Scores of ``sentences``; one that could not be judged scores 0 (never passes)."""
        new = sorted({s for s in sentences if s not in self.cache})
        judged, calls = run_nli(self.backend, self.source, [Hypothesis(i, s) for i, s in
                                                        enumerate(new)],
                            kind="sentence", settings=self.settings, detector="monitor",
                            question=self.question)
        self.calls += calls
        for sentence, judgement in zip(new, judged, strict=True):
            if judgement.verdict == "unverified":
                self.cache[sentence] = 0.0
            elif judgement.score is not None:
                self.cache[sentence] = judgement.score
            else:
                self.cache[sentence] = float(judgement.verdict == "supported")
        return [self.cache[s] for s in sentences]


class Decoder:
    """Continues an answer from the source: the whole greedy answer, or one sampled sentence."""

    def __init__(self, backend: Backend, source: str, question: str | None,
                 settings: Settings, split: Splitter) -> None:
        if not backend.capabilities.continues_assistant:
            raise ConfigError(f"conli generate continues partial answers, which the "
                              f"{backend.name} backend cannot; use the embedded model "
                              f"(local), or a vllm: or llamacpp: server")
        self.backend, self.settings, self.split = backend, settings, split
        self.messages: list[Message] = render(TEMPLATE, source=source,
                                              question=question or "").messages
        self._seeds = itertools.count(1)  # else a call cache replays one sample S times
        self.calls: list[CallRecord] = []

    def _call(self, messages: list[Message], max_tokens: int, *, sampled: bool) -> Completion:
        """One decoding call through the common path; greedy, or sampled with a new seed."""
        request = CompletionRequest(messages, max_tokens=max_tokens,
                                    temperature=self.settings.fod_temperature if sampled else 0.0,
                                    seed=next(self._seeds) if sampled else None)
        completion, record = call_model(self.backend, request, step="generate", template=TEMPLATE)
        self.calls.append(record)
        return completion

    def greedy(self) -> list[str]:
        """The greedy answer, cut into sentences."""
        completion = self._call(self.messages, self.settings.generate_max_tokens, sampled=False)
        return self._cut(completion.text)

    def sample_answer(self) -> list[str]:
        """One whole sampled answer, cut into sentences (reranking's candidates)."""
        completion = self._call(self.messages, self.settings.generate_max_tokens, sampled=True)
        return self._cut(completion.text)

    def _cut(self, text: str) -> list[str]:
        """Sentences of ``text`` up to the first that repeats an earlier one, at most the max."""
        sentences = until_repeat(self.split(text.strip()))
        return sentences[: self.settings.generate_max_sentences]

    def sample(self, prefix: Sequence[str]) -> tuple[str | None, bool]:
        """One sampled next sentence after ``prefix`` (None at the end), and whether it ends."""
        answer = " ".join(prefix)
        messages: list[Message] = list(self.messages)
        if answer:
            messages.append({"role": "assistant", "content": answer})
        completion = self._call(messages, 80, sampled=True)
        sentences = self.split(completion.text.strip())
        if not sentences:
            return None, True
        ended = len(sentences) == 1 and completion.finish_reason == "stop"
        return sentences[0], ended


def generate(backend: Backend, source: str, split: Splitter, settings: Settings, *,
             question: str | None = None, method: Method = "fod",
             on_sentence: OnSentence | None = None) -> Generation:
    """Answer from ``source`` with ``method``; ``on_sentence`` gets each accepted sentence."""
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    started = time.perf_counter()
    monitor = Monitor(backend, source, question, settings)
    decoder = Decoder(backend, source, question, settings, split)
    with scope(settings.check_deadline_seconds):
        if method == "rerank":
            result = _rerank(decoder, monitor, settings)
        else:
            result = _greedy_then_search(decoder, monitor, settings, method, on_sentence)
    calls = decoder.calls + monitor.calls
    return result.model_copy(update={
        "seconds": time.perf_counter() - started, "backend": backend.name,
        "model": backend.model, "usage": usage_of(calls), "usage_by_step": usage_by_step(calls)})


def _greedy_then_search(decoder: Decoder, monitor: Monitor, settings: Settings,
                        method: Method, on_sentence: OnSentence | None) -> Generation:
    texts = decoder.greedy()
    if not texts:
        raise BackendError("the model returned an empty answer")
    scored = [GeneratedSentence(text=t, score=s, origin="greedy")
              for t, s in zip(texts, monitor.scores(texts), strict=True)]
    failed = next((i for i, s in enumerate(scored) if s.score < settings.fod_backtrack), None)
    if method == "greedy" or failed is None:
        return _emit(Generation(method=method, sentences=scored, text=""), on_sentence)
    if method == "abstain":
        return _abstain(method, failed)
    kept = scored[:failed]
    for sentence in kept:
        if on_sentence is not None:
            on_sentence(sentence)
    if method == "backtrack":
        result = Generation(method=method, sentences=kept, text="", backtracked_at=failed)
        return _finish(result)
    beams, samples = _search(decoder, monitor, settings, _Beam(list(kept)))
    best = max(beams, key=lambda b: b.score)
    for sentence in best.sentences[len(kept):]:
        if on_sentence is not None:
            on_sentence(sentence)
    return _finish(Generation(method=method, sentences=best.sentences, text="",
                              backtracked_at=failed, samples=samples))


def _search(decoder: Decoder, monitor: Monitor, settings: Settings,
            start: _Beam) -> tuple[list[_Beam], int]:
    """Algorithm 1, stage 2: sample, prune below tau2, keep the K best, until a beam ends."""
    beams, samples = [start], 0
    while not any(b.ended for b in beams) and \
            max(len(b.sentences) for b in beams) < settings.generate_max_sentences:
        drawn = [(beam, *decoder.sample([s.text for s in beam.sentences]))
                 for beam in beams for _ in range(settings.fod_samples)]
        samples += len(drawn)
        # a sample that says again what its beam said is the model having nothing to add
        drawn = [(beam, None if text is None or _repeats(text, beam) else text, ended)
                 for beam, text, ended in drawn]
        texts = [text for _, text, _ in drawn if text is not None]
        scores = dict(zip(texts, monitor.scores(texts), strict=True))
        grown = []
        for beam, text, ended in drawn:
            if text is None:
                grown.append(_Beam(beam.sentences, ended=True))
            elif scores[text] >= settings.fod_prune:
                grown.append(_Beam([*beam.sentences, GeneratedSentence(
                    text=text, score=scores[text], origin="beam")], ended=ended))
        if not grown:
            break
        unique = {tuple(s.text for s in b.sentences): b for b in grown}
        beams = sorted(unique.values(), key=lambda b: b.score, reverse=True)[
            : settings.fod_beams]
    return beams, samples


def _key(sentence: str) -> str:
    return " ".join(re.findall(r"\w+", sentence.lower()))


def until_repeat(sentences: Sequence[str]) -> list[str]:
    """``sentences`` up to the first that repeats an earlier one (small models loop)."""
    seen: set[str] = set()
    kept = []
    for sentence in sentences:
        if _key(sentence) in seen:
            break
        seen.add(_key(sentence))
        kept.append(sentence)
    return kept


def _repeats(text: str, beam: _Beam) -> bool:
    return _key(text) in {_key(s.text) for s in beam.sentences}


def _rerank(decoder: Decoder, monitor: Monitor, settings: Settings) -> Generation:
    """Sample S x K whole answers (one call each); keep the one with the best mean score."""
    answers = [decoder.sample_answer() for _ in range(settings.fod_samples * settings.fod_beams)]
    flat = [t for answer in answers for t in answer]
    scores = dict(zip(flat, monitor.scores(flat), strict=True))
    best = max(answers, key=lambda a: mean(scores[t] for t in a) if a else 0.0)
    sentences = [GeneratedSentence(text=t, score=scores[t], origin="sample") for t in best]
    return _finish(Generation(method="rerank", sentences=sentences, text="",
                              samples=len(answers)))


def _abstain(method: Method, failed: int) -> Generation:
    return Generation(method=method, sentences=[], text="", abstained=True,
                      message=ABSTAINED, backtracked_at=failed)


def _emit(result: Generation, on_sentence: OnSentence | None) -> Generation:
    for sentence in result.sentences:
        if on_sentence is not None:
            on_sentence(sentence)
    return _finish(result)


def _finish(result: Generation) -> Generation:
    """Join the sentences; an empty answer is an abstention with its message."""
    if not result.sentences:
        return result.model_copy(update={"abstained": True, "message": ABSTAINED, "text": ""})
    return result.model_copy(update={"text": " ".join(s.text for s in result.sentences)})


def generate_answer(source: str, *, question: str | None = None, method: Method = "fod",
                    settings: Settings | None = None,
                    on_sentence: OnSentence | None = None) -> Generation:
    """Answer from ``source`` (and ``question``) with ``method``; see ``conli.generation``."""
    from conli.text.language import language_of
    from conli.text.segment import sentence_splitter

    settings = settings or Settings()
    text = validate_text(source, name="source", max_chars=settings.max_source_chars)
    asked = None if question is None else validate_text(
        question, name="question", max_chars=settings.max_source_chars)
    split = sentence_splitter(language=language_of(settings.language, text))  # the source's
    backend = get_backend(settings.llm, settings)
    try:
        return generate(backend, text, split, settings, question=asked, method=method,
                        on_sentence=on_sentence)
    finally:
        backend.close()

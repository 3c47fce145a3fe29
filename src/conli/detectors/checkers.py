"""What the specialised fact-checkers (MiniCheck, Granite Guardian) share as detectors.

Such a checker answers one question, "does this document support this claim?", with a
Yes or No whose probability is read from the answer token's top log-probabilities. As
MiniCheck's reference implementation does, the source is cut into chunks of whole
sentences (no overlap) that fit the checker's context, every claim is asked against every
chunk, and a claim's score is its best chunk's P(supported); that chunk is its evidence.
A subclass says how to ask (``ask``) and what its answer means; the rest is here.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from math import exp
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from conli.backends import get_backend
from conli.backends.base import Backend, Completion, Request, counted_tokens
from conli.backends.calls import CallRecord, call_model
from conli.detectors.base import Deps, Detection, DetectionContext
from conli.errors import ConfigError
from conli.models import Judgement
from conli.ner.grounding import SourceMentions, mentions_of
from conli.prompts import Prompt
from conli.run.context import propagate, report
from conli.text.language import english_ner_runs, language_of
from conli.text.segment import Segment, sentence_spans
from conli.text.tokens import CHARS_PER_TOKEN_FLOOR

CONTEXT_TOKENS = 32768  # the reference's max_model_len when the server does not say
RESERVED_TOKENS = 300  # what the reference keeps for the prompt and the claim
MIN_CHUNK_TOKENS = 64
TOP_LOGPROBS = 20
SAFETY = 0.9  # chars per token vary inside one text


class CheckerOptions(BaseModel):
    """A checker's own settings (``CONLI_DETECTOR_OPTIONS='{"minicheck": {...}}'``)."""

    model_config = ConfigDict(extra="forbid")

    llm: str | None = Field(default=None, description="backend spec of the checker's server, e.g. "
                            "vllm:http://host:8000/v1#bespoke-minicheck (default: --llm)")
    model: str | None = Field(default=None,
        description="the served model, when llm's URL names none")
    chunk_tokens: int | None = Field(default=None, ge=MIN_CHUNK_TOKENS,
        description="tokens a source chunk may take (default: the context window less 300)")
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0,
                             description="P(supported) above which a claim passes")


@dataclass(frozen=True)
class Chunk:
    """One piece of the source a checker reads: its number and where it stands."""

    index: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Reading:
    """One (chunk, claim) answer: P(supported) where log-probabilities gave it, the words."""

    support: float | None
    said: str  # "yes", "no" (as supported / not), or the unreadable answer itself


def yes_probability(completion: Completion, yes: str = "yes", no: str = "no"
                    ) -> tuple[float, float] | None:
    """P(``yes``) and P(``no``) at the first generated token that is one of them.

    Each sums every top alternative that reads as the word (" Yes", "yes", "YES"), as
    MiniCheck and Granite Guardian's reference code do. None without log-probabilities.
    """
    for token in completion.logprobs:
        if token.token.strip().lower() not in (yes, no):
            continue
        top = token.top or {token.token: token.logprob}
        mass = {yes: 0.0, no: 0.0}
        for alternative, logprob in top.items():
            word = alternative.strip().lower()
            if word in mass:
                mass[word] += exp(logprob)
        return mass[yes], mass[no]
    return None


def first_word(text: str) -> str:
    """The answer's first word, lower-cased, tags and punctuation aside."""
    for piece in text.replace("<", " ").replace(">", " ").split():
        word = piece.strip(".,:;!\"'/").lower()
        if word in ("yes", "no"):
            return word
    return text.strip()[:40]


def chunks_of(source: str, budget_tokens: int, backend: Backend,
              language: str = "auto") -> list[Chunk]:
    """``source`` as whole sentences packed greedily into chunks of ``budget_tokens``.

    MiniCheck's reference counts each sentence's tokens; a backend that can count tokens
    gives the source's own characters per token here, others a conservative floor. A
    sentence longer than a chunk is cut at spaces.
    """
    tokens = counted_tokens(backend, source)
    if tokens and tokens <= budget_tokens:
        return [Chunk(0, 0, len(source), source)]
    chars_per_token = len(source) / tokens * SAFETY if tokens else CHARS_PER_TOKEN_FLOOR
    max_chars = max(1, int(budget_tokens * chars_per_token))
    if len(source) <= max_chars:
        return [Chunk(0, 0, len(source), source)]
    spans = [piece for span in sentence_spans(source, paragraphs=True,
                                              language=language_of(language, source))
             for piece in _cut(source, span, max_chars)]
    packed: list[tuple[int, int]] = []
    for start, end in spans:
        if packed and end - packed[-1][0] <= max_chars:
            packed[-1] = (packed[-1][0], end)
        else:
            packed.append((start, end))
    return [Chunk(i, start, end, source[start:end]) for i, (start, end) in enumerate(packed)]


def _cut(source: str, span: tuple[int, int], max_chars: int) -> list[tuple[int, int]]:
    """One sentence's span, cut at spaces into pieces of at most ``max_chars``."""
    start, end = span
    pieces = []
    while end - start > max_chars:
        cut = source.rfind(" ", start + 1, start + max_chars)
        cut = cut if cut > start else start + max_chars
        pieces.append((start, cut))
        start = cut
        while start < end and source[start].isspace():
            start += 1
    return [*pieces, (start, end)] if end > start else pieces


class SpecialisedChecker:
    """A checker model behind its own format, as a detector (see the module docstring)."""

    name: str
    label: str  # how reasons name it
    supersedes: frozenset[str] = frozenset()
    options = CheckerOptions

    def __init__(self, options: CheckerOptions | None = None) -> None:
        self.settings = options or CheckerOptions()
        if self.settings.model and not self.settings.llm:
            raise ConfigError(f"detector_options.{self.name}.model needs llm: the server "
                              "serving it")
        self._backend: Backend | None = None
        self._lock = threading.Lock()

    def ask(self, backend: Backend, chunk: str, claim: str) -> tuple[Reading, CallRecord]:
        """One question in the checker's own format; ``Reading`` says P(supported)."""
        raise NotImplementedError

    def backend(self, deps: Deps) -> Backend:
        """The checker's own server (``llm``), built once; the run's backend without one."""
        spec = self.settings.llm
        if spec is None:
            return deps.backend
        with self._lock:
            if self._backend is None:
                if self.settings.model:
                    if "#" in spec or "://" not in spec:
                        raise ConfigError(f"detector_options.{self.name}: name the model "
                                          f"once, in llm ({spec!r}) or in model")
                    spec = f"{spec}#{self.settings.model}"
                self._backend = get_backend(spec, deps.settings)
            return self._backend

    def close(self) -> None:
        """Close the checker's own server connection, if it opened one."""
        with self._lock:
            if self._backend is not None:
                self._backend.close()
                self._backend = None

    def call(self, backend: Backend, prompt: Prompt, max_tokens: int,
             chat_template_kwargs: dict[str, Any] | None = None
             ) -> tuple[Completion, CallRecord]:
        """One call of the checker through the one call path, log-probabilities asked."""
        request = Request(prompt.messages, max_tokens=max_tokens, top_logprobs=TOP_LOGPROBS,
                          chat_template_kwargs=chat_template_kwargs)
        return call_model(backend, request, step=self.name, template=prompt.template)

    def detect(self, context: DetectionContext) -> Detection:
        """Every unsettled claim against every chunk; each judged by its best chunk."""
        claims = context.unsettled
        if not claims:
            return Detection()
        backend = self.backend(context.deps)
        budget = self.settings.chunk_tokens or max(
            MIN_CHUNK_TOKENS,
            (backend.capabilities.context_window or CONTEXT_TOKENS) - RESERVED_TOKENS)
        chunks = chunks_of(context.source, budget, backend, context.language)
        # chunk-major: the calls sharing a chunk run together, so a prefix cache keeps it
        pairs = [(chunk, claim) for chunk in chunks for claim in claims]
        done, lock = [0], threading.Lock()

        def one(pair: tuple[Chunk, Segment]) -> tuple[Reading, CallRecord]:
            chunk, claim = pair
            answered = self.ask(backend, chunk.text, claim.text)
            with lock:
                done[0] += 1
                report(self.name, done[0], len(pairs))
            return answered

        workers = max(1, backend.capabilities.max_concurrency)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            answers = list(pool.map(propagate(one), pairs))
        found = Detection(calls=[record for _, record in answers])
        mentions = mentions_of(context.source)
        for number, claim in enumerate(claims):
            readings = [answers[c * len(claims) + number][0] for c in range(len(chunks))]
            judgement = self.judgement(claim.text, readings, chunks,
                                       self.template_for(backend), self.threshold_for(backend))
            if judgement.verdict == "hallucinated":
                judgement = self._with_unstated(judgement, context, mentions)
            found.judgements[claim.index] = [judgement]
        return found

    def judgement(self, claim: str, readings: list[Reading], chunks: list[Chunk],
                  template: str, threshold: float | None = None) -> Judgement:
        """The claim's verdict from its chunks: the best P(supported), or the words alone.

        It passes when P(supported) is above ``threshold`` (default: the option's).
        """
        if all(r.support is not None for r in readings):
            best = max(range(len(readings)), key=lambda i: readings[i].support or 0.0)
            p = readings[best].support or 0.0
            supported = p > (self.settings.threshold if threshold is None else threshold)
            said = f"{self.label}: P(supported) {p:.2f}; {_closest(chunks, best)}"
            return self._judged(claim, supported, chunks, best, said, p, template)
        words = [r.said for r in readings]
        if "yes" in words:
            best = words.index("yes")
            return self._judged(claim, True, chunks, best,
                                f"{self.label}: answered Yes (no log-probabilities); "
                                f"{_closest(chunks, best)}", None, template)
        unreadable = [w for w in words if w != "no"]
        if unreadable:
            return Judgement(detector=self.name, hypothesis=claim, verdict="unverified",
                             template=template, error=f"{self.label} answered "
                             f"{unreadable[0]!r}, neither Yes nor No")
        where = f"the source in {len(chunks)} chunks" if len(chunks) > 1 else "the source"
        return self._judged(claim, False, chunks, None,
                            f"{self.label}: answered No for {where} "
                            "(no log-probabilities)", None, template)

    def template_for(self, backend: Backend) -> str:
        """The prompt template version its judgements record when asking ``backend``."""
        raise NotImplementedError

    def threshold_for(self, backend: Backend) -> float:
        """P(supported) above which a claim passes when asking ``backend``: the option's."""
        return self.settings.threshold

    def _judged(self, claim: str, supported: bool, chunks: list[Chunk], best: int | None,
                said: str, score: float | None, template: str) -> Judgement:
        quoted = chunks[best].text if best is not None and len(chunks) > 1 else ""
        return Judgement(
            detector=self.name, hypothesis=claim,
            verdict="supported" if supported else "hallucinated",
            label="entailment" if supported else None,
            evidence=quoted, evidence_in_source=True if quoted else None,
            reasoning=said, score=score, template=template,
        )

    def _with_unstated(self, judgement: Judgement, context: DetectionContext,
                       mentions: SourceMentions) -> Judgement:
        """A flagged claim's reason, plus the names and numbers the source never states."""
        deps = context.deps
        if deps.settings.ner == "spacy" and not english_ner_runs(context.language):
            return judgement
        unstated = [e.text for e in deps.ner.entities(judgement.hypothesis)
                    if not mentions.mentions(e.text)]
        if not unstated:
            return judgement
        said = f"{judgement.reasoning}; not in the source: {', '.join(unstated)}"
        return judgement.model_copy(update={"reasoning": said})

    def reason(self, judgement: Judgement) -> str:
        """Its own words: the checker, its probability and the closest chunk."""
        if judgement.verdict == "unverified":
            return f"could not be checked: {judgement.error}"
        return judgement.reasoning


def _closest(chunks: list[Chunk], best: int) -> str:
    chunk = chunks[best]
    return (f"closest source: chunk {chunk.index + 1} of {len(chunks)}, "
            f"offsets {chunk.start}-{chunk.end}")

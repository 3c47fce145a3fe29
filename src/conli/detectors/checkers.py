"""What the specialised fact-checkers (MiniCheck, Granite Guardian) share as detectors.

Such a checker answers one question, "does this document support this claim?", with a
Yes or No whose probability is read from the answer token's top log-probabilities. An
answer that is anything but the format's one label word (case, whitespace, punctuation and
the format's own tags aside) is no verdict: the claim is ``unverified`` on an invalid
answer, never read as Yes because the word occurs in it. As MiniCheck's reference
implementation does, the sources are cut into chunks of whole sentences (no overlap, never
across two of the user's sources: ``detectors.chunks``) that fit the checker's context,
every claim is asked against every chunk, and a claim's score is its best chunk's
P(supported); that chunk is its evidence, named by the user's source index. A subclass
says how to ask (``ask``) and what its answer means; the rest is here.
"""

from __future__ import annotations

import re
import string
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from math import exp
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from conli.agents.structured import INVALID_ANSWER
from conli.backends import get_backend
from conli.backends.base import Backend, Completion, CompletionRequest
from conli.backends.calls import CallRecord, call_model
from conli.backends.endpoints import Endpoints
from conli.config.credentials import named_key
from conli.detectors.base import Deps, Detection, DetectionContext
from conli.detectors.chunks import Chunk, chunks_of
from conli.errors import ConfigError
from conli.models import ChunkScore, Judgement
from conli.ner.claims import claim_entities
from conli.ner.grounding import SourceMentions, mentions_of
from conli.prompts import Prompt
from conli.prompts.spotlight import versioned
from conli.run.context import propagate, report
from conli.text.language import language_of_claim
from conli.text.segment import Segment

CONTEXT_TOKENS = 32768  # the reference's max_model_len when the server does not say
RESERVED_TOKENS = 300  # what the reference keeps for the prompt and the claim
MIN_CHUNK_TOKENS = 64
TOP_LOGPROBS = 20


class CheckerOptions(BaseModel):
    """A checker's own settings (``CONLI_DETECTOR_OPTIONS='{"minicheck": {...}}'``)."""

    model_config = ConfigDict(extra="forbid")

    llm: str | None = Field(default=None, description="backend spec of the checker's server, e.g. "
                            "vllm:http://host:8000/v1#bespoke-minicheck (default: --llm)")
    model: str | None = Field(default=None,
        description="the served model, when llm's URL names none")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the environment variable holding llm's key, sent to that server only "
        "(without it, llm gets no key unless it is --llm's own server, which gets VLLM_API_KEY)")
    chunk_tokens: int | None = Field(default=None, ge=MIN_CHUNK_TOKENS,
        description="tokens a source chunk may take (default: the context window less 300)")
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0,
                             description="P(supported) above which a claim passes")


@dataclass(frozen=True)
class Reading:
    """One (chunk, claim) answer: P(supported) where log-probabilities gave it, the words."""

    support: float | None
    said: str  # "yes", "no" (as supported / not), or the unreadable answer itself


LABELS = ("yes", "no")
_EDGES = string.punctuation + string.whitespace


def label_of(text: str, tags: re.Pattern[str] | None = None) -> str | None:
    """The answer's label, ``yes`` or ``no``, when the answer is that one word; else None.

    Case, whitespace and punctuation around it and the format's own ``tags`` (Granite
    Guardian's ``<score> </score>``) are set aside; a sentence that merely holds the word
    ("I cannot tell whether the answer is yes or no") is no verdict.
    """
    bare = tags.sub(" ", text) if tags is not None else text
    word = bare.strip(_EDGES).lower()
    return word if word in LABELS else None


def label_probabilities(completion: Completion, label: str) -> tuple[float, float] | None:
    """P(yes) and P(no) at the token that carries the answer's ``label`` (its last such token).

    Each sums every top alternative that reads as the word (" Yes", "yes", "YES"), as
    MiniCheck and Granite Guardian's reference code do. None without log-probabilities there.
    """
    for token in reversed(completion.logprobs):
        if token.token.strip(_EDGES).lower() != label:
            continue
        top = token.top or {token.token: token.logprob}
        mass = dict.fromkeys(LABELS, 0.0)
        for alternative, logprob in top.items():
            word = alternative.strip(_EDGES).lower()
            if word in mass:
                mass[word] += exp(logprob)
        return mass["yes"], mass["no"]
    return None


def unreadable(completion: Completion) -> Reading:
    """The reading of an answer that is no label: no score, and what it said."""
    return Reading(None, completion.text.strip()[:80])


class SpecialisedChecker:
    """A checker model behind its own format, as a detector (see the module docstring)."""

    name: str
    label: str  # how reasons name it
    supersedes: frozenset[str] = frozenset()
    options = CheckerOptions

    def __init__(self, options: CheckerOptions | None = None) -> None:
        self.settings = options or CheckerOptions()
        for given in ("model", "api_key_env"):
            if getattr(self.settings, given) and not self.settings.llm:
                raise ConfigError(f"detector_options.{self.name}.{given} needs llm: the "
                                  "server it is for")
        if self.settings.api_key_env:  # a key named but missing: said now, not at a check
            named_key(self.settings.api_key_env, f"detector_options.{self.name}.api_key_env")
        self._backend: Backend | None = None
        self._held: tuple[Endpoints, tuple[str, str | None]] | None = None
        self._lock = threading.Lock()

    def ask(self, backend: Backend, chunk: str, claim: str, *, spotlight: bool = False
            ) -> tuple[Reading, CallRecord]:
        """One question in the checker's own format; ``Reading`` says P(supported).

        ``spotlight``: the chunk and claim datamarked (``prompts.spotlight``).
        """
        raise NotImplementedError

    def spec(self) -> str | None:
        """The backend spec of the checker's own server (None: it asks the run's backend)."""
        spec = self.settings.llm
        if spec is None or not self.settings.model:
            return spec
        if "#" in spec or "://" not in spec:
            raise ConfigError(f"detector_options.{self.name}: name the model once, in llm "
                              f"({spec!r}) or in model")
        return f"{spec}#{self.settings.model}"

    def backend(self, deps: Deps) -> Backend:
        """The checker's own server (``llm``), shared through the run's ``Endpoints``.

        Its key is its own (``api_key_env``) and goes to it alone. Without ``llm``, the
        run's backend.
        """
        spec = self.spec()
        if spec is None:
            return deps.backend
        with self._lock:
            if self._backend is None:
                variable = self.settings.api_key_env
                key = (spec, variable)
                self._backend = deps.endpoints.acquire(key, lambda: get_backend(
                    spec, deps.settings, api_key=named_key(
                        variable, f"detector_options.{self.name}.api_key_env")
                    if variable else None))
                self._held = (deps.endpoints, key)
            return self._backend

    def close(self) -> None:
        """Let go of the checker's own server (closed once no detector holds it)."""
        with self._lock:
            held, self._held, self._backend = self._held, None, None
        if held is not None:
            endpoints, key = held
            endpoints.release(key)

    def call(self, backend: Backend, prompt: Prompt, max_tokens: int,
             chat_template_kwargs: dict[str, Any] | None = None
             ) -> tuple[Completion, CallRecord]:
        """One call of the checker through the one call path, log-probabilities asked."""
        request = CompletionRequest(prompt.messages, max_tokens=max_tokens,
                                    top_logprobs=TOP_LOGPROBS,
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
        chunks = chunks_of(context.source, budget, backend, context.language,
                           context.source_map)
        spotlight = context.deps.settings.spotlight
        # chunk-major: the calls sharing a chunk run together, so a prefix cache keeps it
        pairs = [(chunk, claim) for chunk in chunks for claim in claims]
        done, lock = [0], threading.Lock()

        def one(pair: tuple[Chunk, Segment]) -> tuple[Reading, CallRecord]:
            chunk, claim = pair
            answered = self.ask(backend, chunk.text, claim.text, spotlight=spotlight)
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
                                       self.recorded(backend, spotlight),
                                       self.threshold_for(backend))
            if judgement.verdict == "hallucinated":
                judgement = self._with_unstated(judgement, context, mentions)
            found.judgements[claim.index] = [judgement]
        return found

    def judgement(self, claim: str, readings: list[Reading], chunks: list[Chunk],
                  template: str, threshold: float | None = None) -> Judgement:
        """The claim's verdict from its chunks: the best P(supported), or the words alone.

        A chunk whose answer was no label leaves the claim unverified (an invalid answer)
        unless another chunk answered Yes: it may have been the one that supports it.
        It passes when P(supported) is above ``threshold`` (default: the option's).
        """
        if all(r.support is not None for r in readings):
            best = max(range(len(readings)), key=lambda i: readings[i].support or 0.0)
            p = readings[best].support or 0.0
            supported = p > (self.settings.threshold if threshold is None else threshold)
            said = f"{self.label}: P(supported) {p:.2f}; closest: {chunks[best].where()}"
            return self._judged(claim, supported, readings, chunks, best, said, p, template)
        words = [r.said for r in readings]
        if "yes" in words:
            best = words.index("yes")
            return self._judged(claim, True, readings, chunks, best,
                                f"{self.label}: answered Yes (no log-probabilities); "
                                f"{chunks[best].where()}", None, template)
        unread = [w for w in words if w not in LABELS]
        if unread:
            return Judgement(detector=self.name, hypothesis=claim, verdict="unverified",
                             template=template, chunk_scores=_scores(readings, chunks, None),
                             error=f"{INVALID_ANSWER}: {self.label} answered {unread[0]!r}, "
                             "not the one word Yes or No its format asks for")
        where = f"the sources in {len(chunks)} chunks" if len(chunks) > 1 else "the source"
        return self._judged(claim, False, readings, chunks, None,
                            f"{self.label}: answered No for {where} "
                            "(no log-probabilities)", None, template)

    def template_for(self, backend: Backend) -> str:
        """The prompt template version its judgements record when asking ``backend``."""
        raise NotImplementedError

    def recorded(self, backend: Backend, spotlight: bool) -> str:
        """``template_for``, ``+datamark`` when the data is marked (``prompts.spotlight``)."""
        return versioned(self.template_for(backend), spotlight)

    def threshold_for(self, backend: Backend) -> float:
        """P(supported) above which a claim passes when asking ``backend``: the option's."""
        return self.settings.threshold

    def _judged(self, claim: str, supported: bool, readings: list[Reading], chunks: list[Chunk],
                best: int | None, said: str, score: float | None, template: str) -> Judgement:
        """A verdict; a supported claim quotes its best chunk, its evidence."""
        quoted = chunks[best].text if supported and best is not None else ""
        return Judgement(
            detector=self.name, hypothesis=claim,
            verdict="supported" if supported else "hallucinated",
            label="entailment" if supported else None,
            evidence=quoted, evidence_in_source=True if quoted else None,
            reasoning=said, score=score, template=template,
            chunk_scores=_scores(readings, chunks, best),
        )

    def _with_unstated(self, judgement: Judgement, context: DetectionContext,
                       mentions: SourceMentions) -> Judgement:
        """A flagged claim's reason, plus the names and numbers the source never states."""
        deps = context.deps
        read_in = language_of_claim(judgement.hypothesis, deps.settings.language,
                                    context.language)
        claim = claim_entities(judgement.hypothesis, deps.ner, deps.settings.ner, read_in)
        unstated = [e.text for e in claim.entities if not mentions.mentions(e.text)]
        if not unstated:
            return judgement
        said = f"{judgement.reasoning}; not in the source: {', '.join(unstated)}"
        return judgement.model_copy(update={"reasoning": said})

    def reason(self, judgement: Judgement) -> str:
        """Its own words: the checker, its probability and the closest chunk."""
        if judgement.verdict == "unverified":
            return f"could not be checked: {judgement.error}"
        return judgement.reasoning


def _scores(readings: list[Reading], chunks: list[Chunk], best: int | None) -> list[ChunkScore]:
    """Each chunk's answer, by the user's source index and offsets within that source."""
    return [ChunkScore(source=c.source, start=c.start - c.offset, end=c.end - c.offset,
                       score=r.support, supported={"yes": True, "no": False}.get(r.said),
                       best=c.index == best)
            for c, r in zip(chunks, readings, strict=True)]

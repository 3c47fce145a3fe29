"""Check a reply while it streams in: each sentence's verdict as soon as the sentence is complete.

A sentence is complete once the next one has started or the stream has ended: the reply
so far is re-cut by the project's own splitter (``text.segment.split_response``) as it grows, so
"Dr. Smith", "2.4 million" and "U.S." end a sentence where ``check`` ends it, and what was
handed on is remembered by offset, never checked twice. Each sentence is checked alone,
detect only, by the checker's graph in a worker thread while the loop reads on: the
stream's plan is prepared once (``Checker.prepare``), so its detectors are built once, and
every sentence runs on it with what is left of the stream's one deadline.

The NDJSON protocol of ``POST /v1/check/stream`` over this is ``service.stream``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, Field

from conli import errors
from conli.config import Settings
from conli.gate import response_verdict, supported_share
from conli.graph.runner import CheckRunner, Prepared
from conli.models import CheckResult, Entity, Note, Score, SentenceResult, UsageTotals, Verdict
from conli.run.inputs import CheckInput, SourceMap, blank, validate_text
from conli.run.plan import Plan, applied, make_plan, options
from conli.run.request import StreamRequest
from conli.text.language import Language, language_of
from conli.text.segment import (
    FINAL_STOP,
    Segment,
    is_claim,
    select_claims,
    split_response,
    utf16_offset,
)

log = logging.getLogger("conli.streaming")

NDJSON = "application/x-ndjson"
OPENING_LINE = '{"source": ..., "question": ...}'

# --- what a stream yields -----------------------------------------------------------------


class SentenceEvent(BaseModel):
    """One complete sentence of the reply and its verdict (``checked`` false: not a claim)."""

    event: Literal["sentence"] = "sentence"
    sentence: SentenceResult = Field(description="as in check's result: offsets index the reply")
    usage: UsageTotals = Field(default_factory=UsageTotals, description="this sentence's calls")
    latency_seconds: float = Field(
        description="from the sentence's completion (the next one began, or the reply ended) "
        "to this verdict"
    )


class DoneEvent(BaseModel):
    """The end of the reply: the verdict over every sentence, computed as ``check`` does."""

    event: Literal["done"] = "done"
    verdict: Verdict
    support_score: Score | None = Field(
        default=None, description="lowest sentence score, if scored")
    supported_share: Score | None = Field(
        default=None, description="supported checked sentences over checked sentences")
    sentences: int = Field(description="sentences in the reply, checked or not")
    response_chars: int = Field(description="characters in the whole reply")
    backend: str
    model: str
    usage: UsageTotals
    templates: list[str]
    seconds: float = Field(description="from the start of the stream to this summary")
    language: Language = Field(default="en", description="the language the reply was read in")
    notes: list[Note] = Field(default_factory=list,
                              description="steps that did not run on this text, and why")


Events = AsyncGenerator[SentenceEvent | DoneEvent, None]
# Entered while a sentence is checked: the service stops its idle clock then (the client
# may be waiting for that verdict before it sends more).
Busy = Callable[[], AbstractContextManager[None]]


# --- the streamed check -------------------------------------------------------------------


def stream_check(checker: CheckRunner, request: StreamRequest, *, plan: Plan | None = None,
                 within: float | None = None, busy: Busy = nullcontext) -> Events:
    """Yield each sentence's verdict of ``request``'s reply as it completes, and a summary.

    ``request``'s source and question were validated when it was made (``StreamRequest.of``,
    before any chunk is read); the reply is validated sentence by sentence with the same
    limits, and the whole reply may not exceed ``max_response_chars``. Its options apply
    over ``plan`` (default: the checker's), run detect only: no rewrite, no judge; ``within``
    is the door's own time limit. A plan the checker cannot run raises ``ConfigError`` here.
    Each sentence's check runs inside ``busy()``.
    """
    given = applied(plan if plan is not None else checker.plan, request.options)
    given = given if within is None else given.within(within)
    # a stream reports sentences only: word scores (forward passes when semantic) go unread
    detect_only = options(mitigate=False, judge=False, deadline_seconds=given.deadline,
                          tuning={"word_scores": "off"})
    ready = checker.prepare(make_plan(given.settings, detect_only))
    return _Stream(checker, (request.source, request.source_map), request.question, ready,
                   busy).events(request.chunks)


_NOT_FOR_BOUNDARIES = ("tagger", "attribute_ruler", "ner")


def _begun(text: str) -> bool:
    """The segment does not begin in lowercase, as a continuation of the one before may."""
    return not text[:1].islower()


@dataclass(frozen=True)
class _Completed:
    """A segment that will not change any more, and when it became so (``time.monotonic``)."""

    segment: Segment
    at: float


class _Cutter:
    """Reads the chunks and re-cuts the reply as it grows, each in a task of its own.

    At most one cut runs at a time, on the reply as it is when it starts: chunks that
    arrive meanwhile wait for the next cut, so a slow cut never falls further behind.
    """

    def __init__(self, nlp: Any, limits: Settings, language: Language) -> None:
        # sentence boundaries come from the parser alone: the cut skips the other components
        skip = [name for name in _NOT_FOR_BOUNDARIES if name in getattr(nlp, "pipe_names", ())]
        self.nlp = functools.partial(nlp, disable=skip) if skip else nlp
        self.limits = limits
        self.language = language  # the source's, as each sentence's check reads it
        self.text = ""
        self.done_upto = 0  # the end of the last segment handed on
        self.count = 0  # segments handed on
        self.ready: deque[_Completed] = deque()
        self.changed, self.grown = asyncio.Event(), asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self, chunks: AsyncIterable[str]) -> None:
        """Start reading ``chunks`` and cutting, alongside the checks."""
        self.tasks = [asyncio.create_task(self._read(chunks)),
                      asyncio.create_task(self._keep_cutting())]

    async def stop(self) -> None:
        """Stop reading and cutting (no effect once the reply has ended)."""
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            await asyncio.wait(self.tasks)
        for task in self.tasks:
            if not task.cancelled():
                task.exception()  # retrieved: it was raised to the consumer, or is moot

    async def next(self) -> _Completed | None:
        """The next complete segment; None once the reply has ended; a failure, at once."""
        reader = self.tasks[0]
        while True:
            self.changed.clear()
            for task in self.tasks:
                failure = None if not task.done() or task.cancelled() else task.exception()
                if failure is not None:
                    raise failure
            if self.ready:
                return self.ready.popleft()
            if reader.done():
                return None
            await self.changed.wait()

    async def _read(self, chunks: AsyncIterable[str]) -> None:
        iterator = aiter(chunks)
        try:
            async for chunk in iterator:
                self._append(chunk)
                if not blank(chunk):  # only a visible character can start the next sentence
                    self.grown.set()
            self.tasks[1].cancel()  # the last cut is made on the whole reply
            validate_text(self.text, name="response", max_chars=self.limits.max_response_chars)
            self._complete(await self._split(), final=True)
        finally:
            self.changed.set()
            close = getattr(iterator, "aclose", None)
            if close is not None:
                await close()

    async def _keep_cutting(self) -> None:
        try:
            while True:
                await self.grown.wait()
                self.grown.clear()
                self._complete(await self._split(), final=False)
        finally:
            self.changed.set()

    def _append(self, chunk: object) -> None:
        if not isinstance(chunk, str):
            raise errors.EncodingError(f"each chunk must be a string, not {type(chunk).__name__}")
        limit = self.limits.max_response_chars
        if len(self.text) + len(chunk) > limit:
            raise errors.InputTooLargeError(
                f"response has over {limit:,} characters, over the limit of {limit:,}; "
                "raise CONLI_MAX_RESPONSE_CHARS if you mean it"
            )
        self.text += chunk

    async def _split(self) -> list[Segment]:
        """The segments from the start of the line being written, offsets into the whole reply."""
        line_start = self.text.rfind("\n", 0, self.done_upto) + 1
        found = await asyncio.to_thread(split_response, self.text[line_start:], self.nlp,
                                        language=self.language)
        return [replace(s, start=s.start + line_start, end=s.end + line_start) for s in found]

    def _complete(self, segments: list[Segment], *, final: bool) -> None:
        """Hand on every new segment that a later one follows (every one, when ``final``)."""
        fresh = [s for s in map(self._unsent, segments) if s is not None]
        limit = self.limits.max_response_sentences
        if limit is not None and self.count + len(fresh) > limit:
            raise errors.InputTooLargeError(
                f"the response has at least {self.count + len(fresh)} sentences, over the limit "
                f"of {limit}"
            )
        settled = len(self.text) if final else self._settled(segments)
        for segment in fresh:
            if segment.end <= settled:
                self._hand_on(segment)

    def _settled(self, segments: list[Segment]) -> int:
        """Where the last cut lies that more text will not move (0: none yet).

        A cut holds once it falls at a line's end, or after a stop (``segment.FINAL_STOP``:
        . ! ? … 。！？) when the next segment does not begin in lowercase: the splitter cuts
        "the U.S. i" but not "the U.S. in", "groups... we h" but not "groups... we have".
        Any other cut holds once a later cut does, or the reply ends.
        """
        for before, after in reversed(list(itertools.pairwise(segments))):
            if "\n" in self.text[before.end : after.start] or (
                FINAL_STOP.search(before.text) and _begun(after.text)
            ):
                return before.end
        return 0

    def _unsent(self, segment: Segment) -> Segment | None:
        """``segment`` less what was handed on already (None if nothing is left of it)."""
        if segment.end <= self.done_upto:
            return None
        if segment.start >= self.done_upto:
            return None if blank(segment.text) else segment
        rest = self.text[self.done_upto : segment.end]  # re-cut across a sentence handed on
        start = segment.end - len(rest.lstrip())
        return None if blank(rest) else replace(segment, start=start, text=rest.lstrip())

    def _hand_on(self, segment: Segment) -> None:
        validate_text(segment.text, name="response", max_chars=self.limits.max_response_chars)
        self.ready.append(_Completed(replace(segment, index=self.count), time.monotonic()))
        self.count += 1
        self.done_upto = segment.end
        self.changed.set()


class _Stream:
    """One streamed check: the cutter reads, this checks each sentence in order and reports."""

    def __init__(self, checker: CheckRunner, source: tuple[str, SourceMap],
                 question: str | None, ready: Prepared, busy: Busy) -> None:
        (self.source, self.source_map), self.question = source, question
        self.checker, self.ready = checker, ready
        self.language = language_of(ready.plan.settings.language, self.source)
        self.cutter = _Cutter(ready.deps.nlp, ready.plan.settings, self.language)
        self.running: asyncio.Future[CheckResult] | None = None
        self.busy = busy
        self.templates: set[str] = set()
        self.notes: list[Note] = []
        self.started = 0.0

    async def events(self, chunks: AsyncIterable[str]) -> Events:
        """Yield each sentence as it is checked, then the summary; stop all work when closed."""
        self.started = time.monotonic()
        self.cutter.start(chunks)
        done: list[SentenceEvent] = []
        try:
            async for event in self._sentences():
                done.append(event)
                yield event
            yield self._summary(done)
        finally:
            await self.cutter.stop()
            if self.running is not None and not self.running.done():
                await asyncio.wait([self.running])  # a running check cannot be interrupted

    async def _sentences(self) -> AsyncIterator[SentenceEvent]:
        """Each sentence checked or passed as ``select_claims`` marks it in the reply so far.

        Once the reply holds a claim, the marks of what came before no longer change, so
        each sentence is decided as it completes. Until then (a reply with no claim is
        itself the claim) sentences wait for a claim or the reply's end to decide them.
        """
        seen: list[Segment] = []
        held: list[_Completed] = []
        claimed = False
        while (item := await self.cutter.next()) is not None:
            seen.append(item.segment)
            held.append(item)
            claimed = claimed or (item.segment.checked and is_claim(item.segment.text))
            if claimed:
                async for event in self._decided(held, select_claims(seen)):
                    yield event
                held = []
        if held:  # the reply ended with no claim: as check, every candidate is checked
            async for event in self._decided(held, select_claims(seen)):
                yield event

    async def _decided(self, held: list[_Completed], marks: list[Segment]
                       ) -> AsyncIterator[SentenceEvent]:
        """The ``held`` sentences (the last of the reply so far), checked where marked."""
        for item, mark in zip(held, marks[len(marks) - len(held):], strict=True):
            yield await self._check(item) if mark.checked else self._unchecked(item)

    def _unchecked(self, item: _Completed) -> SentenceEvent:
        s = item.segment
        sentence = SentenceResult(index=s.index, text=s.text, start=s.start, end=s.end,
                                  checked=False)
        return SentenceEvent(sentence=self._in_utf16(sentence),
                             latency_seconds=time.monotonic() - item.at)

    async def _check(self, item: _Completed) -> SentenceEvent:
        """Run the graph on this sentence alone in a worker thread; the loop keeps reading."""
        checked = CheckInput(source=self.source, response=item.segment.text,
                             question=self.question, source_map=self.source_map)
        work = functools.partial(contextvars.copy_context().run, self.checker.run_graph, checked,
                                 plan=self._ready_now())
        with self.busy():
            self.running = asyncio.get_running_loop().run_in_executor(None, work)
            result = await asyncio.shield(self.running)
        self.templates.update(result.templates)
        notes = [n if n.sentence is None else n.model_copy(update={"sentence": item.segment.index})
                 for n in result.notes]  # as the reply numbers its sentences
        self.notes += [note for note in notes if note not in self.notes]
        return SentenceEvent(sentence=self._in_utf16(placed(result, item.segment)),
                             usage=result.usage, latency_seconds=time.monotonic() - item.at)

    def _in_utf16(self, sentence: SentenceResult) -> SentenceResult:
        """``sentence`` with its offsets in the reply also as UTF-16 indices."""
        text = self.cutter.text
        return sentence.model_copy(update={"start_utf16": utf16_offset(text, sentence.start),
                                           "end_utf16": utf16_offset(text, sentence.end)})

    def _ready_now(self) -> Prepared:
        """The stream's run context, with what is left of its deadline (one per stream)."""
        deadline = self.ready.plan.deadline
        if deadline is None:
            return self.ready
        left = self.started + deadline - time.monotonic()
        if left <= 0:
            raise errors.DeadlineExceededError(
                "the streamed check ran past its deadline (CONLI_CHECK_DEADLINE_SECONDS); "
                "no further model call was started"
            )
        return self.ready.within(left)

    def _summary(self, done: list[SentenceEvent]) -> DoneEvent:
        sentences = [event.sentence for event in done]
        scores = [s.score for s in sentences if s.score is not None]
        backend = self.checker.backend
        return DoneEvent(
            verdict=response_verdict(s.verdict for s in sentences),
            support_score=min(scores) if scores else None,
            supported_share=supported_share(sentences),
            sentences=len(sentences),
            response_chars=len(self.cutter.text),
            backend=backend.name,
            model=backend.model,
            usage=total_usage([event.usage for event in done]),
            templates=sorted(self.templates),
            seconds=time.monotonic() - self.started,
            language=self.language,
            notes=self.notes,
        )


def placed(result: CheckResult, segment: Segment) -> SentenceResult:
    """The check of one sentence alone, as that sentence of the whole reply.

    Offsets (the sentence's, its entities') are moved to index the whole reply. Should the
    splitter cut the sentence differently when it stands alone, the check's own verdict and
    score over its parts (the pipeline's merge of a response) are the sentence's.
    """
    parts = result.sentences
    entities = [_moved(e, segment.start) for p in parts for e in p.entities]
    judgements = [
        j.model_copy(update={"entity": _moved(j.entity, segment.start)}) if j.entity else j
        for p in parts for j in p.judgements
    ]
    where = {"index": segment.index, "text": segment.text, "start": segment.start,
             "end": segment.end, "entities": entities, "judgements": judgements}
    if len(parts) == 1:
        return parts[0].model_copy(update=where)
    checked = [p for p in parts if p.checked]
    return SentenceResult(
        **where,
        checked=bool(checked),
        verdict=result.verdict if checked else None,
        detector=next((p.detector for p in checked if p.detector), None),
        reasons=[reason for p in checked for reason in p.reasons],
        score=result.support_score,
    )


def _moved(entity: Entity, offset: int) -> Entity:
    return entity.model_copy(update={"start": entity.start + offset, "end": entity.end + offset})


def total_usage(usages: list[UsageTotals]) -> UsageTotals:
    """The sum of some sentences' usage; prefill/decode only where every call reported them."""
    spent = [u.model_dump() for u in usages if u.calls]
    if not spent:
        return UsageTotals()
    return UsageTotals.model_validate({
        key: None if any(u[key] is None for u in spent) else sum(u[key] for u in spent)
        for key in UsageTotals.model_fields
    })

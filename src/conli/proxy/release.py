"""A streamed reply released sentence by sentence, each once it is checked (``Checker.astream``).

The upstream's text is read by a task of its own into ``Reply``; the streaming checker
reads it from there and yields each sentence's verdict as the sentence completes. A
supported sentence (or one that states no claim) goes out with the text before it; a
flagged one goes out as written (``annotate``), rewritten alone and re-checked (``rewrite``;
removed when its rewrite is empty), or ends the reply with the operator's refusal
(``block``, and ``rewrite`` when the rewrite fails). The last item is the ``conli`` field.
Closing the iteration (the client left) stops the upstream's reading and starts no
further check; a check already running finishes first.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import aclosing, suppress

from conli.chat.state import reply_text
from conli.config import Settings
from conli.errors import DeadlineExceededError
from conli.gate import passes, response_verdict, supported_share
from conli.models import (
    SCORE_METHODS,
    CheckResult,
    Mitigation,
    SentenceChange,
    SentenceResult,
    UsageTotals,
)
from conli.pipeline import Checker
from conli.proxy.verdicts import Policy, Verdicts, unchecked
from conli.proxy.wire import NO_SOURCE, Turn
from conli.run.plan import make_plan
from conli.run.request import RunRequest, StreamRequest
from conli.streaming import DoneEvent, total_usage
from conli.version import __version__, source_commit


class UpstreamFailed(Exception):
    """The upstream failed while its reply streamed in; ``error`` is its failure."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Reply:
    """The upstream's reply as it arrives: read once, by ``pump``, handed on by ``chunks``."""

    def __init__(self) -> None:
        self.text = ""
        self.error: BaseException | None = None
        self.ended, self.grown = asyncio.Event(), asyncio.Event()

    async def pump(self, deltas: AsyncIterable[str]) -> None:
        """Read every delta of the reply (a failure is kept, for whoever reads next)."""
        try:
            async for delta in deltas:
                self.text += delta
                self.grown.set()
        except Exception as exc:
            self.error = exc
        finally:
            self.ended.set()
            self.grown.set()

    async def chunks(self) -> AsyncIterator[str]:
        """The reply's text as it grows; ``UpstreamFailed`` if the upstream failed."""
        read = 0
        while True:
            self.grown.clear()
            if read < len(self.text):
                chunk, read = self.text[read:], len(self.text)
                yield chunk
            elif self.ended.is_set():
                if self.error is not None:
                    raise UpstreamFailed(self.error)
                return
            else:
                await self.grown.wait()

    async def whole(self) -> str:
        """The whole reply, once it has ended (``UpstreamFailed`` if it failed)."""
        await self.ended.wait()
        if self.error is not None:
            raise UpstreamFailed(self.error)
        return self.text


async def released(checker: Checker, turn: Turn, policy: Policy, deltas: AsyncIterable[str],
                   *, settings: Settings, within: float | None = None,
                   max_sentences: int | None = None) -> AsyncIterator[str | Verdicts]:
    """The text to send, piece by piece as each sentence is checked, then the ``conli`` field.

    ``within``: seconds the whole check may take. A check that fails raises (the operator's
    ``refuse``) or lets the rest of the reply out marked unchecked (``pass``); an upstream
    failure raises ``UpstreamFailed`` either way. Without sources (the operator passes such
    requests) the reply goes out as it comes, marked unchecked.
    """
    if turn.sources is None:
        try:
            async for delta in deltas:
                yield delta
        except Exception as exc:
            raise UpstreamFailed(exc) from exc
        yield unchecked(NO_SOURCE, policy)
        return
    reply = Reply()
    release = _Release(checker, turn, policy, settings, reply, within, max_sentences)
    pump = asyncio.create_task(reply.pump(deltas))
    try:
        async for item in release.run():
            yield item
    finally:
        pump.cancel()
        with suppress(asyncio.CancelledError):
            await pump


class _Release:
    """One streamed reply: the checker's events in, the pieces to send out."""

    def __init__(self, checker: Checker, turn: Turn, policy: Policy, settings: Settings,
                 reply: Reply, within: float | None, max_sentences: int | None) -> None:
        self.checker, self.turn, self.policy, self.settings = checker, turn, policy, settings
        self.reply = reply
        self.options = policy.options(turn, max_sentences)
        self.plan = make_plan(settings, self.options.in_mode(policy.mode))
        self.within = within
        if within is not None:
            self.plan = self.plan.within(within)
        self.started = time.monotonic()
        self.upto = 0  # the end of the last sentence handled, in the reply
        self.sent: list[str] = []
        self.sentences: list[SentenceResult] = []
        self.changes: list[SentenceChange] = []
        self.usages: list[UsageTotals] = []
        self.blocked: str | None = None  # why the reply was cut short
        self.rewrite_failed = False

    async def run(self) -> AsyncIterator[str | Verdicts]:
        """Each piece as it may go, the tail of the reply, then the ``conli`` field."""
        reply, done = self.reply, None
        events = self.checker.run_stream(
            StreamRequest.of(self.turn.sources or [], reply.chunks(), limits=self.settings,
                             question=self.turn.question, options=self.options),
            within=self.within)
        try:
            async with aclosing(events) as stream:
                async for event in stream:
                    if isinstance(event, DoneEvent):
                        done = event  # the last event
                        continue
                    self.sentences.append(event.sentence)
                    self.usages.append(event.usage)
                    piece = await self._piece(event.sentence)
                    if piece:
                        yield self._sending(piece)
                    if self.blocked is not None:
                        break
        except UpstreamFailed:
            raise
        except Exception as exc:
            empty = reply.ended.is_set() and not reply.text.strip()
            if self.policy.on_check_error == "refuse" and not empty:
                raise
            rest = (await reply.whole())[self.upto:]
            if rest:
                yield self._sending(rest)
            yield unchecked("the reply is empty: nothing to check" if empty else
                            f"the check failed after {len(self.sentences)} sentences and the "
                            f"rest went out unchecked: {type(exc).__name__}: {exc}",
                            self.policy, self.turn.found_in)
            return
        if self.blocked is not None:
            yield self._sending(("\n\n" if self.sent else "") + self.policy.refusal)
        elif self.reply.text[self.upto:]:
            yield self._sending(self.reply.text[self.upto:])
        yield self._verdicts(done)

    def _sending(self, piece: str) -> str:
        self.sent.append(piece)
        return piece

    async def _piece(self, sentence: SentenceResult) -> str:
        """What goes out for this sentence: with the text before it, rewritten, or nothing."""
        gap = self.reply.text[self.upto:sentence.start]
        written = self.reply.text[sentence.start:sentence.end]
        self.upto = sentence.end
        verdict, on_flag = sentence.verdict, self.policy.on_flag
        if verdict in (None, "supported") or on_flag == "annotate":
            return gap + written
        if on_flag == "block":
            self.blocked = f"sentence {sentence.index} is {verdict}"
            return ""
        if verdict == "unverified":
            return gap + written
        after = await self._rewritten(sentence, written)
        return gap + after if after else ""

    async def _rewritten(self, sentence: SentenceResult, written: str) -> str | None:
        """The sentence's verified rewrite ("" when removed); None (and blocked) if it failed."""
        request = RunRequest.of(self.turn.sources, written, limits=self.settings,
                                question=self.turn.question,
                                options=self.options.model_copy(update={"judge": False}))
        work = functools.partial(contextvars.copy_context().run, self.checker.run_rewrite,
                                 request, within=self._left())
        result = await asyncio.get_running_loop().run_in_executor(None, work)
        self.usages.append(result.usage)
        status = result.mitigation.status
        if status != "rewritten":
            self.blocked = f"the rewrite of sentence {sentence.index} did not complete ({status})"
            self.rewrite_failed = True
            return None
        after = reply_text(result) or ""
        verdicts = [c.rewrite_verdict for c in result.mitigation.changes]
        self.changes.append(SentenceChange(
            index=sentence.index, action="rewrite" if after else "remove", before=written,
            after=after, rewrite_verdict=verdicts[0] if len(verdicts) == 1 else None))
        return after

    def _left(self) -> float | None:
        deadline = self.plan.deadline
        if deadline is None:
            return None
        left = self.started + deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceededError("the streamed check ran past its deadline; no further "
                                        "model call was started")
        return left

    def _verdicts(self, done: DoneEvent | None) -> Verdicts:
        """The ``conli`` field: the streamed sentences as one result, and what went out."""
        sentences = self.sentences
        scores = [s.score for s in sentences if s.score is not None]
        methods = {s.score_method for s in sentences if s.score_method is not None}
        rewriting = self.policy.on_flag == "rewrite"
        status = ("failed" if self.rewrite_failed else "rewritten" if self.changes
                  else "nothing_flagged" if rewriting else "disabled")
        backend = self.checker.backend
        result = CheckResult(
            verdict=done.verdict if done else response_verdict(s.verdict for s in sentences),
            support_score=min(scores) if scores else None,
            supported_share=supported_share(sentences),
            score_method=max(methods, key=SCORE_METHODS.index) if methods else None,
            threshold=self.plan.threshold, backend=backend.name, model=backend.model,
            sentences=sentences, refined_text="".join(self.sent),
            mitigation=Mitigation(status=status, changes=self.changes,
                                  error=self.blocked if status == "failed" else None),
            usage=total_usage(self.usages), usage_by_step={},
            timings={"total": time.monotonic() - self.started},
            templates=done.templates if done else [], language=done.language if done else "en",
            notes=done.notes if done else [], conli_version=__version__, commit=source_commit())
        result.passed = passes(result, result.threshold)
        action = "blocked" if self.blocked else "rewritten" if self.changes else "as_written"
        sent = result.refined_text
        return Verdicts(status="checked", verdict=result.verdict,
                        supported_share=result.supported_share, action=action,
                        on_flag=self.policy.on_flag, sources_from=self.turn.found_in,
                        reason=self.blocked, original=self.reply.text if sent != self.reply.text
                        else None, result=result)

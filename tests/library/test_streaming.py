"""Streamed checks: ``Checker.astream`` and ``POST /v1/check/stream`` over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.errors import (
    AuthenticationError,
    EmptyInputError,
    EncodingError,
    InputTooLargeError,
)
from conli.pipeline import Checker
from conli.run.plan import make_plan
from conli.streaming import DoneEvent, SentenceEvent
from tests.support import scripted
from tests.support.paths import ROOT
from tests.support.responders import claims_of, kind_of, rule_responder
from tests.support.streams import DETECT, _checker, _chunks, _collect, _pieces

SOURCE = (
    "The Millbrook pool cost 2.4 million dollars. It was designed by Dr. Jones of Millbrook. "
    "It moved to the U.S. in 1990."
)
CHUNKS = ["The pool cost 2.", "4 million dollars. Dr", ". Smith designed it"]


# --- Checker.astream ----------------------------------------------------------------------


def test_each_sentence_arrives_as_soon_as_the_next_begins_and_matches_check(
    settings: Settings,
) -> None:
    checker, _ = _checker(settings)
    first_verdict = asyncio.Event()
    produced: list[str] = []

    async def reply() -> AsyncIterator[str]:
        for part in CHUNKS[:-1]:
            produced.append(part)
            yield part
        # the last chunk is held back until the first sentence's verdict has arrived
        await asyncio.wait_for(first_verdict.wait(), 10)
        produced.append(CHUNKS[-1])
        yield CHUNKS[-1]

    async def run() -> list[Any]:
        events = []
        async for event in checker.astream(SOURCE, reply()):
            if isinstance(event, SentenceEvent) and event.sentence.index == 0:
                assert produced == CHUNKS[:-1]  # verdict before the stream is over
                first_verdict.set()
            events.append(event)
        return events

    events = asyncio.run(run())
    expected = checker.check(SOURCE, "".join(CHUNKS))
    assert [e.sentence for e in events[:-1]] == expected.sentences
    assert [s.text for s in expected.sentences] == [
        "The pool cost 2.4 million dollars.", "Dr. Smith designed it"]
    assert [s.verdict for s in expected.sentences] == ["supported", "hallucinated"]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.verdict == expected.verdict == "hallucinated"
    assert done.sentences == 2 and done.response_chars == len("".join(CHUNKS))
    assert done.usage.calls == sum(e.usage.calls for e in events[:-1]) > 0
    assert all(e.latency_seconds >= 0 for e in events[:-1])


REPLIES = [
    "The pool cost 2.4 million dollars. Dr. Smith designed it. It moved to the U.S. in 1990.",
    "# The pool\nWhat did it cost? The pool cost 2.4 million dollars.\n\n"
    "- Dr. Smith designed it.\n- It has six lanes",
    "Arthur's Magazine",
    "Summary:\nThe pool cost 3.5 million. It opened on Saturday, June 14.  It was designed by "
    "Dr. Smith, who moved to the U.S. in 1990. About 800 people came",
]


@pytest.mark.parametrize("reply", REPLIES)
def test_any_chunking_yields_exactly_the_sentences_check_finds(
    settings: Settings, reply: str
) -> None:
    checker, _ = _checker(settings)
    expected = checker.check(SOURCE, reply).sentences
    rng = random.Random(7)
    for longest in (1, 3, 8, 40):
        events = asyncio.run(_collect(checker.astream(SOURCE, _chunks(_pieces(reply, rng,
                                                                               longest)))))
        assert [e.sentence for e in events[:-1]] == expected, longest
        assert all(reply[s.start : s.end] == s.text for s in expected)


def test_a_stream_ending_mid_sentence_completes_that_sentence(settings: Settings) -> None:
    checker, _ = _checker(settings)
    parts = ["The pool cost 2.4 mil", "lion dollars. Dr. Smith desi"]
    events = asyncio.run(_collect(checker.astream(SOURCE, _chunks(parts))))
    *sentences, done = events
    assert [(e.sentence.text, e.sentence.verdict) for e in sentences] == [
        ("The pool cost 2.4 million dollars.", "supported"),
        ("Dr. Smith desi", "hallucinated"),
    ]
    assert sentences[1].sentence.start == len("The pool cost 2.4 million dollars. ")
    assert isinstance(done, DoneEvent) and done.verdict == "hallucinated"


def test_a_backend_error_mid_stream_raises_and_nothing_after_is_supported(
    settings: Settings,
) -> None:
    base = rule_responder()

    def respond(messages: list[Message]) -> str:
        if kind_of(messages) == "nli" and any("Smith" in c for c in claims_of(messages)):
            raise AuthenticationError("the key was rejected")
        return base(messages)

    checker = Checker(settings.model_copy(update=DETECT),
                      backend=ScriptedBackend(responder=respond))
    seen: list[Any] = []

    async def run() -> None:
        async for event in checker.astream(SOURCE, _chunks([*CHUNKS, ". It has six lanes."])):
            seen.append(event)

    with pytest.raises(AuthenticationError):
        asyncio.run(run())
    assert [e.sentence.verdict for e in seen] == ["supported"]


def test_a_bad_source_is_refused_before_any_chunk_is_read(settings: Settings) -> None:
    checker, model = _checker(settings)
    read: list[str] = []

    async def reply() -> AsyncIterator[str]:
        read.append("started")
        yield "The pool cost 2.4 million dollars."

    with pytest.raises(EmptyInputError):
        checker.astream("   ", reply())
    with pytest.raises(EncodingError):
        checker.astream(SOURCE, reply(), question="who\x1b[2J?")
    assert read == [] and model.calls == []


@pytest.mark.parametrize(("update", "parts", "error"), [
    ({"max_response_chars": 60}, ["The pool cost 2.4 million dollars. ", "Dr. Smith designed "
                                  "it in a hurry."], InputTooLargeError),
    ({"max_response_sentences": 2}, ["One fact holds here. ", "Two facts hold here. ",
                                     "Three facts hold here."], InputTooLargeError),
    ({}, ["  ", "\n"], EmptyInputError),
    ({}, ["The pool cost 2.4 million dollars. It has \x07 six lanes. And more."], EncodingError),
])
def test_the_reply_is_held_to_the_same_limits_as_check(
    settings: Settings, update: dict[str, Any], parts: list[str], error: type[Exception]
) -> None:
    checker, _ = _checker(settings)
    with pytest.raises(error):
        plan = make_plan(checker.settings.model_copy(update=update))
        asyncio.run(_collect(checker.astream(SOURCE, _chunks(parts), plan=plan)))


def test_closing_the_stream_stops_reading_and_checking(settings: Settings) -> None:
    checker, model = _checker(settings)
    closed: list[str] = []

    async def reply() -> AsyncIterator[str]:
        try:
            for i in range(50):
                yield f"Fact number {i} is stated here. "
                await asyncio.sleep(0.01)
        finally:
            closed.append("closed")

    async def run() -> int:
        events = checker.astream(SOURCE, reply())
        async for _ in events:
            break
        await events.aclose()
        calls = len(model.calls)
        await asyncio.sleep(0.3)
        assert len(model.calls) == calls
        return calls

    assert asyncio.run(run()) < 10
    assert closed == ["closed"]


def test_the_deadline_covers_the_whole_stream(settings: Settings) -> None:
    checker, _ = _checker(settings)
    timed = checker.settings.model_copy(update={"check_deadline_seconds": 0.2})
    parts = [f"Fact number {i} is stated here. " for i in range(8)]
    from conli.errors import DeadlineExceededError

    with pytest.raises(DeadlineExceededError):
        asyncio.run(_collect(checker.astream(SOURCE, _chunks(parts, pause=0.05),
                                             plan=make_plan(timed))))


def test_a_stream_request_brings_its_options_and_the_door_its_time_limit(
        settings: Settings) -> None:
    """``run_stream`` takes a ``StreamRequest``: its options, then ``within``, over the plan."""
    from conli.errors import DeadlineExceededError
    from conli.run.plan import options
    from conli.run.request import StreamRequest

    checker, _ = _checker(settings)
    parts = [f"Fact number {i} is stated here. " for i in range(8)]
    for request, within in (
            (StreamRequest.of(SOURCE, _chunks(parts, pause=0.05), limits=checker.settings,
                              options=options(deadline_seconds=0.2)), None),
            (StreamRequest.of(SOURCE, _chunks(parts, pause=0.05), limits=checker.settings), 0.2)):
        with pytest.raises(DeadlineExceededError):
            asyncio.run(_collect(checker.run_stream(request, within=within)))


def test_a_stream_builds_its_detectors_once_however_many_sentences(settings: Settings) -> None:
    """Every sentence runs on the plan prepared for the stream: no detector is built again."""
    from conli import detectors
    from tests.support.word_detector import WordDetector

    built: list[WordDetector] = []

    def counted() -> WordDetector:
        built.append(WordDetector())
        return built[-1]

    detectors.register("counted_word", counted)
    checker = Checker(settings.model_copy(update={"detectors": ["counted_word"], **DETECT}),
                      backend=ScriptedBackend(responder=rule_responder()))
    before = len(built)
    parts = [("This fact" + " too" * i + (" is FALSE here. " if i == 3 else " is stated. "))
             for i in range(10)]
    events = asyncio.run(_collect(checker.astream(SOURCE, _chunks(parts))))
    verdicts = [e.sentence.verdict for e in events if isinstance(e, SentenceEvent)]
    assert verdicts == ["hallucinated" if i == 3 else "supported" for i in range(10)]
    assert len(built) - before == 1  # one per stream, not one per sentence


def test_a_stream_scores_no_words_it_would_throw_away(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each streamed sentence is a check whose word scores nobody reads: none are computed."""
    from conli.graph import nodes

    def refused(*args: Any) -> None:
        raise AssertionError("word scores computed for a stream")

    monkeypatch.setattr(nodes, "word_scores", refused)
    checker, _ = _checker(settings.model_copy(update={"word_scores": "lexical", **DETECT}))
    events = asyncio.run(_collect(checker.astream(SOURCE, _chunks(["One fact. ", "Two."]))))
    assert sum(isinstance(e, SentenceEvent) for e in events) == 2


# --- POST /v1/check/stream over real loopback HTTP -----------------------------------------

pytest.importorskip("fastapi")
from tests.support.service import KEY, serving  # noqa: E402
from tests.support.service_streams import (  # noqa: E402
    HTTP_SOURCE,
    STREAM,
    RawStream,
    _run,
    _settings,
)


@pytest.mark.integration
def test_http_verdicts_arrive_while_the_body_is_still_being_sent() -> None:
    reply = "The library opened in 1962. The library is FALSE run by a charity."
    with serving(_settings()) as base:

        async def talk() -> list[dict[str, Any]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            await client.send({"text": "The library opened in 19"})
            await client.send({"text": "62. The"})
            assert await client.head() == 200
            assert client.headers["content-type"].startswith("application/x-ndjson")
            first = await client.line()  # the body is not finished: no end chunk sent yet
            await client.send({"text": " library is FALSE run by a charity."})
            await client.end()
            return [first, *await client.rest()]

        lines = _run(talk)
        whole = httpx.post(f"{base}/v1/check", json={"source": HTTP_SOURCE, "response": reply},
                           headers={"X-API-Key": KEY}).json()
    assert [line["event"] for line in lines] == ["sentence", "sentence", "done"]
    assert [line["sentence"] for line in lines[:2]] == whole["sentences"]
    assert lines[2]["verdict"] == whole["verdict"] == "hallucinated"


@pytest.mark.integration
def test_http_body_ending_mid_sentence_completes_it() -> None:
    with serving(_settings()) as base:

        async def talk() -> list[dict[str, Any]]:
            client = await RawStream.open(base)
            await client.send(b'{"source": ' + json.dumps(HTTP_SOURCE).encode() + b"}\n")
            await client.send(b'{"text": "The library opened in 1962. It is run by the city co')
            await client.send(b'un"}')  # the last line need not end with a newline
            await client.end()
            assert await client.head() == 200
            return await client.rest()

        lines = _run(talk)
    assert [(line.get("sentence") or {}).get("text") for line in lines] == [
        "The library opened in 1962.", "It is run by the city coun", None]
    assert lines[-1]["event"] == "done" and lines[-1]["sentences"] == 2


@pytest.mark.integration
@pytest.mark.parametrize("body_finished", [False, True])
def test_http_client_leaving_stops_model_calls_and_frees_the_slot(body_finished: bool) -> None:
    model = scripted.backend(sleep=0.25)
    settings = _settings(service_max_concurrent=1)
    sentences = [f"The library opened in 1962 and fact {n} holds." for n in range(8)]
    with serving(settings, backend=model) as base:

        def last_checked() -> int:  # the highest sentence any model call was about
            found = [re.findall(r"fact \[? ?(\d+)", m[-1]["content"]) for m in model.calls]
            return max(int(n) for numbers in found for n in numbers)

        async def talk() -> int:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            for sentence in sentences:
                await client.send({"text": sentence + " "})
            if body_finished:
                await client.end()
            assert await client.head() == 200
            first = await client.line()
            assert first is not None and first["sentence"]["index"] == 0
            client.abort()
            return last_checked()

        at_leaving = _run(talk)
        time.sleep(1.5)  # long enough for several more sentences had the work gone on
        assert last_checked() <= at_leaving + 1  # at most the check already starting
        assert last_checked() < len(sentences) - 2
        answer = httpx.post(f"{base}/v1/check", json={"source": HTTP_SOURCE,
                            "response": "The library opened in 1962."},
                            headers={"X-API-Key": KEY}, timeout=30)
        assert answer.status_code == 200  # the only slot is free again


@pytest.mark.integration
def test_http_stream_needs_the_api_key() -> None:
    with serving(_settings()) as base:

        async def talk(key: str | None) -> int:
            client = await RawStream.open(base, key=key)
            await client.send({"source": HTTP_SOURCE})
            status = await client.head()
            problem = json.loads(await client.body())
            assert problem["status"] == 401 and client.headers["content-type"].startswith(
                "application/problem+json")
            return status

        assert _run(lambda: talk(None)) == 401
        assert _run(lambda: talk("wrong")) == 401


@pytest.mark.integration
@pytest.mark.parametrize(("first", "status"), [
    (b'{"source": "   "}\n', 422),
    (b'{"source": "s", "extra": 1}\n', 422),
    (b"not json\n", 422),
    (b"\xff\xfe\n", 422),
    (b'{"source": "' + b"s" * 3_000 + b'"}\n', 413),
])
def test_http_a_bad_opening_line_is_a_problem_before_any_answer(first: bytes, status: int) -> None:
    with serving(_settings(service_max_body_bytes=2_000)) as base:

        async def talk() -> int:
            client = await RawStream.open(base)
            await client.send(first)
            await client.end()
            code = await client.head()
            assert json.loads(await client.body())["status"] == code
            return code

        assert _run(talk) == status
        empty = httpx.post(f"{base}{STREAM}", content=b"", headers={"X-API-Key": KEY})
        assert empty.status_code == 422


@pytest.mark.integration
def test_http_failures_after_the_answer_began_are_one_error_line() -> None:
    settings = _settings(service_max_body_bytes=600)
    with serving(settings) as base:

        async def too_long() -> list[dict[str, Any]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            await client.send({"text": "The library opened in 1962. It"})
            assert await client.head() == 200
            lines = [await client.line()]
            for _ in range(20):  # past the body limit while streaming
                await client.send({"text": " has a cafe and it has a cafe."})
            return [*lines, *await client.rest()]

        lines = _run(too_long)
        assert lines[0]["event"] == "sentence"
        assert lines[-1]["event"] == "error" and lines[-1]["status"] == 413

        async def bad_line() -> list[dict[str, Any]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            await client.send({"chunk": "wrong key"})
            await client.end()
            assert await client.head() == 200
            return await client.rest()

        (error,) = _run(bad_line)
        assert error["status"] == 422 and "line 2" in error["detail"]


@pytest.mark.integration
def test_http_backend_failure_mid_stream_is_an_error_line_never_supported() -> None:
    def respond(messages: list[Message]) -> str:
        if any("charity" in c for c in claims_of(messages)):
            raise AuthenticationError("the key was rejected")
        return scripted.responder()(messages)

    model = ScriptedBackend(responder=respond, judges_batches=True)
    with serving(_settings(), backend=model) as base:

        async def talk() -> list[dict[str, Any]]:
            client = await RawStream.open(base)
            await client.send({"source": HTTP_SOURCE})
            await client.send({"text": "The library opened in 1962. It is run by a charity."})
            await client.end()
            assert await client.head() == 200
            return await client.rest()

        lines = _run(talk)
    assert [line["event"] for line in lines] == ["sentence", "error"]
    assert lines[0]["sentence"]["verdict"] == "supported"
    assert lines[1]["status"] == 502 and lines[1]["type"] == "urn:conli:problem:backend"


@pytest.mark.integration
def test_http_stream_takes_a_slot_and_answers_504_at_the_time_limit() -> None:
    settings = _settings(service_max_streams=1, service_timeout_seconds=0.6)
    with serving(settings) as base:

        async def refused() -> RawStream:  # streams have slots of their own (issue 32.4)
            other = await RawStream.open(base)
            await other.send({"source": HTTP_SOURCE})
            return other

        async def talk() -> list[dict[str, Any]]:
            holder = await RawStream.open(base)
            await holder.send({"source": HTTP_SOURCE})
            await holder.send({"text": "The library opened in 1962. It"})
            assert await holder.head() == 200
            busy = await refused()
            assert await busy.head() == 429 and busy.headers["retry-after"]
            lines = await holder.rest()  # the body never ends: the time limit does
            await asyncio.sleep(0.2)
            again = await refused()
            assert await again.head() == 200
            again.abort()
            return lines

        lines = _run(talk)
    assert [line["event"] for line in lines] == ["sentence", "error"]
    assert lines[1]["status"] == 504


@pytest.mark.integration
def test_http_stream_is_in_the_openapi() -> None:
    with serving(_settings()) as base:
        schema = httpx.get(f"{base}/openapi.json").json()
    route = schema["paths"][STREAM]["post"]
    assert set(route["requestBody"]["content"]) == {"application/x-ndjson", "text/plain"}
    answer = route["responses"]["200"]["content"]["application/x-ndjson"]["schema"]
    assert answer["discriminator"]["propertyName"] == "event"
    assert {"401", "413", "422", "429"} <= set(route["responses"])


@pytest.mark.integration
def test_langgraph_example_streams_verdicts_before_the_reply_ends() -> None:
    import subprocess
    import sys

    example = ROOT / "examples" / "langgraph_chat_hook.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                          timeout=120, check=True)
    streamed = re.findall(r"streamed: \[(\w+)\] (.*) \(after (\d+) of 59", done.stdout)
    assert [(verdict, text) for verdict, text, _ in streamed] == [
        ("supported", "The library opened in 1962."),
        ("hallucinated", "It is run by a private charity."),
    ]
    # when the first verdict lands depends on the machine's load; that it can land before
    # the reply ends is tested without timing above (the held-back last chunk)
    assert int(streamed[0][2]) <= 59 and int(streamed[1][2]) == 59

"""A 429 storm over a batch of 50 responses, plus the limiter and error-mapping units."""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate

import pytest

from conli.agents.nli import Hypothesis
from conli.backends import get_backend
from conli.backends.http_errors import error_for_status, retry_after_seconds
from conli.backends.limits import CallLimiter
from conli.backends.openai_compat import parse_compat_spec
from conli.config import Settings
from conli.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    RateLimitError,
    TransientBackendError,
)
from tests.support.http_fakes import (
    Reply,
    Request,
    claims,
    nli_answer,
    openai_chat,
    openai_error,
    serve,
)
from tests.support.responders import nli

RESPONSES = 50
SENTENCES = 3
MAX_CONCURRENCY = 6


def _label(text: str) -> str:
    return "contradiction" if "false" in text else "entailment"


@pytest.mark.integration
def test_429_storm_over_50_responses_judges_everything_once(monkeypatch):
    lock = threading.Lock()
    attempts: Counter[tuple[str, ...]] = Counter()
    judged: Counter[str] = Counter()
    in_flight = peak = limited = 0

    def handler(request: Request) -> Reply:
        nonlocal in_flight, peak, limited
        texts = tuple(claims(request.body))
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
            attempts[texts] += 1
            storm = attempts[texts] <= 2  # every call is refused twice before it passes
            if storm:
                limited += 1
            else:
                judged.update(texts)
        try:
            if storm:
                return Reply(429, openai_error(429, "Too Many Requests"),
                             {"retry-after-ms": "40", "retry-after": "1"}, delay=0.01)
            return Reply(200, openai_chat(json.dumps(nli_answer(list(texts), _label))),
                         delay=0.02)
        finally:
            with lock:
                in_flight -= 1

    responses = [
        [f"Response {r} sentence {s} is {'false' if (r + s) % 4 == 0 else 'true'}."
         for s in range(SENTENCES)]
        for r in range(RESPONSES)
    ]
    with serve(handler) as server:
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
        settings = Settings(azure_openai_endpoint=server.url, max_concurrency=MAX_CONCURRENCY,
                            request_timeout=5.0)
        backend = get_backend("azure:storm", settings)

        def check(sentences: list[str]) -> list[str]:
            hypotheses = [Hypothesis(i, s) for i, s in enumerate(sentences)]
            judgements, _ = nli(backend, "source", hypotheses, kind="sentence",
                                             settings=settings)
            return [j.verdict for j in judgements]

        with ThreadPoolExecutor(max_workers=16) as pool:  # a batch runner's worker pool
            verdicts = list(pool.map(check, responses))
        backend.close()

    expected = [["hallucinated" if "false" in s else "supported" for s in r] for r in responses]
    assert verdicts == expected  # every sentence judged; nothing unverified
    assert limited == 2 * RESPONSES  # the storm really happened, and each was retried
    assert len(server.requests) == 3 * RESPONSES
    every_claim = [s for r in responses for s in r]
    assert set(judged) == set(every_claim)
    assert all(judged[c] == 1 for c in every_claim)  # no hypothesis judged twice
    assert peak <= MAX_CONCURRENCY  # the process-wide limit held under 16 workers


def test_limiter_holds_requests_per_minute():
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limiter = CallLimiter(4, requests_per_minute=2, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        with limiter.slot(10):
            pass
    assert slept and now[0] >= 60.0  # the third call waited for the window to move


def test_limiter_holds_tokens_per_minute_and_settles_real_usage():
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    limiter = CallLimiter(4, tokens_per_minute=1000, clock=lambda: now[0], sleep=sleep)
    with limiter.slot(900) as reservation:
        reservation.settle(100)  # the call cost far less than estimated
    with limiter.slot(800):
        pass
    assert now[0] == 0.0  # 100 + 800 fits: no wait
    with limiter.slot(500):
        pass
    assert now[0] >= 60.0  # 900 + 500 does not: waited for the window


def test_retry_after_parsing():
    assert retry_after_seconds({"Retry-After": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "0.5"}) == 0.5
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
    http_date_now = retry_after_seconds({"retry-after": formatdate(usegmt=True)})
    assert http_date_now is not None and http_date_now <= 1.0


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [(401, None, AuthenticationError), (403, None, AuthenticationError),
     (429, None, RateLimitError), (429, "insufficient_quota", BadRequestError),
     (500, None, TransientBackendError), (529, None, TransientBackendError),
     (408, None, TransientBackendError), (400, None, BadRequestError),
     (404, None, BadRequestError)],
)
def test_status_mapping(status, code, error):
    mapped = error_for_status("p", status, "m", {"retry-after": "3"}, code)
    assert type(mapped) is error
    if error is RateLimitError:
        assert mapped.retry_after == 3.0


def test_specs_and_unknown_backend_lists_valid_ones():
    with pytest.raises(ConfigError, match="valid backends") as raised:
        get_backend("bedrock:x", Settings())
    for name in ("anthropic", "azure", "llamacpp", "local", "openai", "vllm"):
        assert name in str(raised.value)
    assert parse_compat_spec("http://h:8000/v1#Qwen/Qwen2.5-7B") == ("http://h:8000/v1",
                                                                     "Qwen/Qwen2.5-7B")
    assert parse_compat_spec("http://h:8000/v1/") == ("http://h:8000/v1", None)
    with pytest.raises(ConfigError, match="vllm:http"):
        parse_compat_spec("h:8000#m")
    with pytest.raises(ConfigError, match="needs a model"):
        get_backend("openai:", Settings())

"""The specialised checkers' formats against a REAL llama.cpp server on loopback.

The embedded GGUF served over HTTP (``llama_server``, this folder's conftest's fixture) is
asked in MiniCheck's format and in Granite Guardian's written-out prompt: one generated
token, its top log-probabilities read as P(supported), the source cut into chunks that each fit
the server's context, and the second claim on a chunk reusing the first one's prefill
(llama-server's prompt cache). Tiny prompts only: the machine has two cores.
"""

from __future__ import annotations

import pytest

from conli.backends import get_backend
from conli.config import Settings
from conli.detectors.guardian import GraniteGuardian
from conli.detectors.minicheck import MiniCheck
from conli.pipeline import Checker

pytestmark = [pytest.mark.model, pytest.mark.integration]

DOCUMENT = "The Eiffel Tower is in Paris. It was finished in 1889."


def test_minicheck_format_one_token_with_logprobs_and_a_cached_prefix(llama_server):
    backend = get_backend(f"vllm:{llama_server}/v1#any", Settings(request_timeout=120))
    checker = MiniCheck()
    try:
        true, true_call = checker.ask(backend, DOCUMENT, "The Eiffel Tower is in Paris.")
        false, false_call = checker.ask(backend, DOCUMENT, "The Eiffel Tower is in Rome.")
    finally:
        backend.close()
    for reading, call in ((true, true_call), (false, false_call)):
        assert call.usage.completion_tokens == 1  # one answer token, prefill only
        assert len(call.logprobs) == 1 and len(call.logprobs[0].top) > 1
        assert reading.support is not None and 0.0 <= reading.support <= 1.0
        assert call.template == "minicheck.v1"
    assert true.support > false.support  # the model's P(Yes) ranks the two claims
    # the same system prompt and document: the second call reused the first one's prefill
    assert false_call.usage.cached_tokens > 0


def test_granite_guardian_rendered_prompt_reads_a_risk(llama_server):
    backend = get_backend(f"llamacpp:{llama_server}/v1#any", Settings(request_timeout=120))
    try:
        reading, call = GraniteGuardian().ask(backend, DOCUMENT, "It was finished in 1889.")
    finally:
        backend.close()
    assert call.template == "granite_guardian.v1" and call.usage.completion_tokens == 1
    assert reading.support is not None and 0.0 <= reading.support <= 1.0


def test_a_check_chunks_the_source_to_the_chunk_size(llama_server):
    source = " ".join([DOCUMENT, "Gustave Eiffel's company built it for a world's fair.",
                       "It is about 330 metres tall today.",
                       "Millions of people visit it every year.",
                       "Its iron is painted every seven years or so."])
    assert len(source) > 64 * 3  # more than one chunk of 64 tokens at 3 characters a token
    settings = Settings(llm=f"vllm:{llama_server}/v1#any", request_timeout=120,
                        detectors=["minicheck"], mitigate=False, judge=False,
                        detector_options={"minicheck": {"chunk_tokens": 64}})
    with Checker(settings) as checker:
        result = checker.check(source, "The Eiffel Tower was finished in 1889.")
    sentence = result.sentences[0]
    assert sentence.score_method == "logprobs" and sentence.score is not None
    chunks = result.usage.calls  # one call per chunk for the one claim
    assert chunks >= 2
    judged = sentence.judgements[0]
    assert len(judged.chunk_scores or []) == chunks  # each piece read is reported
    best = next(c for c in judged.chunk_scores or [] if c.best)
    assert f"source 0, offsets {best.start}-{best.end}" in judged.reasoning

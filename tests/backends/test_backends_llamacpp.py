"""The OpenAI-compatible path end to end: a REAL llama.cpp HTTP server on loopback.

The fixture (``llama_server``, in this folder's conftest) starts llama.cpp's server
in-process (``xllamacpp``) on 127.0.0.1 with the embedded GGUF, and the backend reaches it
through the official ``openai`` client exactly as it would reach vLLM. Two tiny generations
only (the machine has two cores).
"""

from __future__ import annotations

import json

import pytest

from conli.backends import CompletionRequest, get_backend
from conli.config import Settings
from conli.errors import BadRequestError

pytestmark = [pytest.mark.model, pytest.mark.integration]


def test_vllm_spec_reaches_real_server_with_json_schema(llama_server):
    # no #model: the backend asks the server's /v1/models which model it serves
    backend = get_backend(f"vllm:{llama_server}/v1", Settings(request_timeout=120))
    try:
        schema = {
            "type": "object",
            "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
            "required": ["answer"],
            "additionalProperties": False,
        }
        completion = backend.complete(CompletionRequest(
            [{"role": "system", "content": "Answer in JSON."},
             {"role": "user", "content": "Is Paris in France?"}],
            max_tokens=16, json_schema=schema,
        ))
        assert json.loads(completion.text)["answer"] in ("yes", "no")  # the grammar held
        assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
        assert completion.usage.seconds > 0
        # llama-server's own timings come through the OpenAI SDK's extra fields
        usage = completion.usage
        assert usage.prefill_seconds is not None and usage.decode_seconds is not None
        assert 0 < usage.prefill_seconds + usage.decode_seconds <= usage.seconds
        assert backend.model and backend.name == "vllm"
    finally:
        backend.close()


def test_real_server_rejection_is_a_bad_request_not_retried(llama_server):
    backend = get_backend(f"vllm:{llama_server}/v1#any", Settings(request_timeout=120))
    try:
        with pytest.raises(BadRequestError):  # 400: prompt exceeds the 1024-token context
            backend.complete(CompletionRequest([{"role": "user", "content": "word " * 3000}],
                                               max_tokens=8))
    finally:
        backend.close()


def test_llamacpp_spec_continues_a_prefilled_answer_on_the_real_server(llama_server):
    # what conli generate needs: the trailing assistant message continued, not a new turn
    backend = get_backend(f"llamacpp:{llama_server}/v1#any", Settings(request_timeout=120))
    try:
        assert backend.name == "llamacpp" and backend.capabilities.continues_assistant
        completion = backend.complete(CompletionRequest(
            [{"role": "user", "content": "In one sentence: what is the capital of France?"},
             {"role": "assistant", "content": "The capital of France is"}],
            max_tokens=6,
        ))
        assert "Paris" in completion.text
        assert "capital" not in completion.text  # went on from the prefix, did not restart
    finally:
        backend.close()

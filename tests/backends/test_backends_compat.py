"""OpenAI-compatible servers (vLLM, llama-server) on loopback: naming, continuation, generate.

The fake server checks what reached it: a request whose last message is the assistant's
asks the server to continue it (vLLM's ``continue_final_message`` without
``add_generation_prompt``; llama-server continues a trailing assistant message anyway),
and every other request is the plain Chat Completions body it was before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from conli.backends import CompletionRequest as ModelRequest
from conli.backends import get_backend
from conli.backends.base import Message
from conli.cli import app as cli
from conli.config import Settings
from tests.support.fake_clock import FakeClock
from tests.support.http_fakes import Reply, Request, openai_chat, openai_error, serve
from tests.support.responders import rule_responder

pytestmark = pytest.mark.integration

GENERATOR = "You answer using only the SOURCE"
SOURCE = "The pier opened in 1921. It is 400 metres long. Tickets cost 5 euros."
GREEDY = "The pier opened in 1921. It cost FALSE money. It is 400 metres long."
CONTINUE = {"continue_final_message": True, "add_generation_prompt": False}
PREFILL: list[Message] = [{"role": "user", "content": "Say hi."},
                          {"role": "assistant", "content": "Hi, I am"}]


def _continued(body: dict[str, Any]) -> bool:
    """True when the request asks the server to continue its last (assistant) message."""
    return all(body.get(key) == value for key, value in CONTINUE.items())


def _plain(body: dict[str, Any]) -> bool:
    """True when the request carries neither continuation key (a normal chat request)."""
    return not CONTINUE.keys() & body.keys()


def _models_or_chat(request: Request) -> Reply:
    if request.path.endswith("/models"):
        return Reply(200, {"object": "list", "data": [{"id": "served", "object": "model"}]})
    return Reply(200, openai_chat("x"))


class Server:
    """A llama-server stand-in answering generation and NLI prompts by rule.

    The first ``failures`` requests get a 503; a continuation gets the next of
    ``samples``; a claim holding ``FALSE`` is judged unsupported.
    """

    def __init__(self, samples: list[str], failures: int = 0) -> None:
        self.samples: Iterator[str] = iter(samples * 20)
        self.failures = failures
        self.judge = rule_responder(bad=("FALSE",))

    def __call__(self, request: Request) -> Reply:
        if self.failures > 0:
            self.failures -= 1
            return Reply(503, openai_error(503, "loading model"))
        messages = request.body["messages"]
        if GENERATOR not in messages[0]["content"]:
            assert _plain(request.body), "a detection request must stay as it was"
            return Reply(200, openai_chat(self.judge(messages)))
        if messages[-1]["role"] == "assistant":
            assert _continued(request.body), request.body
            return Reply(200, openai_chat(" " + next(self.samples), finish="stop"))
        assert _plain(request.body)
        return Reply(200, openai_chat(GREEDY))


@pytest.mark.parametrize("name", ["vllm", "llamacpp"])
def test_a_compat_backend_is_named_after_its_spec_and_continues_answers(name: str) -> None:
    with serve(_models_or_chat) as server:
        backend = get_backend(f"{name}:{server.url}/v1", Settings())  # model from /models
        try:
            assert (backend.name, backend.model) == (name, "served")
            assert backend.capabilities.continues_assistant
            backend.complete(ModelRequest(PREFILL, max_tokens=8))
            backend.complete(ModelRequest(PREFILL[:1], max_tokens=8))
        finally:
            backend.close()
    chats = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert _continued(chats[0]) and chats[0]["messages"][-1] == PREFILL[-1]
    assert _plain(chats[1])  # a request ending with the user's message is left alone


def test_openai_itself_is_not_asked_to_continue(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(_models_or_chat) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        backend = get_backend("openai:gpt-test", Settings())
        try:
            assert not backend.capabilities.continues_assistant
            backend.complete(ModelRequest(PREFILL, max_tokens=8))
        finally:
            backend.close()
    assert _plain(server.requests[0].body)


def test_an_unreachable_llama_server_is_named_in_the_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Any, clock: FakeClock) -> None:
    source = tmp_path / "source.txt"
    source.write_text(SOURCE)
    with serve(lambda _r: Reply(200, {})) as server:
        url = server.url
    code = cli.main(["generate", "--source", str(source), "--llm", f"llamacpp:{url}/v1#m"])
    err = capsys.readouterr().err
    assert code == 3 and "could not reach llamacpp" in err and "vllm" not in err
    assert len(clock.waits) == 3  # retried as transient, on the fake clock


def test_conli_generate_on_llama_server_continues_with_retries_and_usage(
        capsys: pytest.CaptureFixture[str], tmp_path: Any, clock: FakeClock) -> None:
    source = tmp_path / "source.txt"
    source.write_text(SOURCE)
    handler = Server(["Tickets cost 5 euros."], failures=1)
    with serve(handler) as server:
        code = cli.main(["generate", "--source", str(source), "--method", "fod", "--json",
                         "--llm", f"llamacpp:{server.url}/v1#served"])
    out = capsys.readouterr().out
    assert code == 0, out
    result = json.loads(out)
    assert result["text"] == "The pier opened in 1921. Tickets cost 5 euros."
    assert [s["origin"] for s in result["sentences"]] == ["greedy", "beam"]
    assert (result["backend"], result["model"]) == ("llamacpp", "served")
    continued = [r.body for r in server.requests if r.body["messages"][-1]["role"] == "assistant"]
    assert continued and all(_continued(body) for body in continued)
    assert continued[0]["messages"][-1]["content"] == "The pier opened in 1921."
    chats = len(server.requests)
    assert result["usage"]["calls"] == chats - 1 and result["usage"]["failed_attempts"] == 1
    assert result["usage_by_step"]["generate"]["failed_attempts"] == 1  # the 503, retried



def test_conli_generate_text_names_the_backend_that_wrote_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    source = tmp_path / "source.txt"
    source.write_text(SOURCE)
    with serve(Server([])) as server:
        code = cli.main(["generate", "--source", str(source), "--method", "greedy",
                         "--llm", f"llamacpp:{server.url}/v1#served"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[0] == "[1.00 greedy] The pier opened in 1921."
    assert lines[-1].startswith("greedy on llamacpp (served): 3 sentences")
    assert f"{len(server.requests)} model calls" in lines[-1]

"""A key goes only to the endpoint it was given for (issue 62.6), through ``conli check``.

Two loopback servers record the ``Authorization`` header of every request: ``--llm``'s
(which rewrites) and MiniCheck's own (``detector_options.minicheck.llm``). ``VLLM_API_KEY``
is ``--llm``'s key: the checker's server, on another port, never receives it (it used to);
the checker's own key (``api_key_env``) reaches it and nothing else.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from conli.cli import app as cli
from tests.support.http_fakes import Reply, Request, openai_chat, serve
from tests.support.responders import rule_responder

pytestmark = pytest.mark.integration

SOURCE = "Ada Lovelace lived in London."
RESPONSE = "Ada Lovelace lived in Paris."
LLM_KEY, CHECKER_KEY = "llm-secret-1", "checker-secret-2"


def _llm(request: Request) -> Reply:
    rewrite = rule_responder(bad=("Paris",), rewrite=lambda t: t.replace("Paris", "London"))
    return Reply(200, openai_chat(rewrite(request.body["messages"])))


def _checker(request: Request) -> Reply:
    claim = request.body["messages"][-1]["content"].split("\nClaim: ")[-1]
    p_yes = 0.1 if "Paris" in claim else 0.9
    top = [{"token": "Yes", "logprob": math.log(p_yes), "bytes": None},
           {"token": "No", "logprob": math.log(1 - p_yes), "bytes": None}]
    word = "Yes" if p_yes > 0.5 else "No"
    body = openai_chat(word, completion=1)
    body["choices"][0]["logprobs"] = {"content": [{"token": word, "bytes": None,
                                                   "logprob": math.log(max(p_yes, 1 - p_yes)),
                                                   "top_logprobs": top}]}
    return Reply(200, body)


def _check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any],
           checker_url: str, llm_url: str) -> int:
    (tmp_path / "s.txt").write_text(SOURCE)
    (tmp_path / "r.txt").write_text(RESPONSE)
    monkeypatch.setenv("CONLI_DETECTOR_OPTIONS", json.dumps(
        {"minicheck": {"llm": f"vllm:{checker_url}/v1#checker", **options}}))
    return cli.main(["check", "--source", str(tmp_path / "s.txt"), "--response",
                     str(tmp_path / "r.txt"), "--llm", f"vllm:{llm_url}/v1#m", "--json",
                     "--detector", "minicheck", "--no-judge", "-q"])


def _keys(requests: list[Request]) -> set[str]:
    return {r.headers.get("authorization", "") for r in requests}


def test_vllm_api_key_goes_to_the_llm_server_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VLLM_API_KEY", LLM_KEY)
    with serve(_llm) as llm, serve(_checker) as checker:
        assert _check(tmp_path, monkeypatch, {}, checker.url, llm.url) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "hallucinated" and result["mitigation"]["status"] == "rewritten"
    assert checker.requests and llm.requests  # both were asked
    assert _keys(llm.requests) == {f"Bearer {LLM_KEY}"}
    assert not any(LLM_KEY in key for key in _keys(checker.requests))


def test_a_checker_key_of_its_own_goes_to_its_server_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VLLM_API_KEY", LLM_KEY)
    monkeypatch.setenv("MINICHECK_API_KEY", CHECKER_KEY)
    with serve(_llm) as llm, serve(_checker) as checker:
        assert _check(tmp_path, monkeypatch, {"api_key_env": "MINICHECK_API_KEY"},
                      checker.url, llm.url) == 0
    assert _keys(checker.requests) == {f"Bearer {CHECKER_KEY}"}
    assert _keys(llm.requests) == {f"Bearer {LLM_KEY}"}
    capsys.readouterr()


def test_the_llm_server_serving_the_checker_too_gets_its_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """One server for both (another model on it): VLLM_API_KEY was given for that server."""
    monkeypatch.setenv("VLLM_API_KEY", LLM_KEY)

    def both(request: Request) -> Reply:
        if request.body["model"] == "checker":
            return _checker(request)
        return _llm(request)

    with serve(both) as server:
        assert _check(tmp_path, monkeypatch, {}, server.url, server.url) == 0
    assert _keys(server.requests) == {f"Bearer {LLM_KEY}"}
    capsys.readouterr()


def test_a_key_variable_that_is_not_set_is_refused_before_any_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    with serve(_llm) as llm, serve(_checker) as checker:
        code = _check(tmp_path, monkeypatch, {"api_key_env": "NO_SUCH_KEY"}, checker.url,
                      llm.url)
    assert code == 2
    assert "NO_SUCH_KEY is not set" in capsys.readouterr().err
    assert not checker.requests and not llm.requests

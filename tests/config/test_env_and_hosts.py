"""Where a user's settings and servers come from (issue 65, item 7): ``./.env`` read by the
command line (never over the environment), ``OLLAMA_HOST`` honoured by ``ollama:MODEL``, and
a connection error that names the URL it could not reach.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conli.backends import get_backend
from conli.backends.base import CompletionRequest as ModelRequest
from conli.backends.openai_compat import ollama_url
from conli.config import Settings
from conli.config.credentials import load_env_file
from conli.errors import ConfigError, TransientBackendError
from tests.support.http_fakes import Reply, Request, openai_chat, serve
from tests.support.paths import ROOT
from tests.support.responders import rule_responder

SOURCE = "Ada Lovelace lived in London. In 1843 she published notes on the Analytical Engine."
RESPONSE = "Ada Lovelace lived in Paris."


def _provider() -> tuple[list[str], object]:
    answer = rule_responder(bad=("Paris",))
    models: list[str] = []

    def handle(request: Request) -> Reply:
        models.append(str(request.body.get("model")))
        return Reply(200, openai_chat(answer(request.body["messages"])))

    return models, handle


@pytest.mark.integration
def test_the_command_line_reads_dot_env_under_the_environment(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text(SOURCE, "utf-8")
    (tmp_path / "r.txt").write_text(RESPONSE, "utf-8")
    models, handle = _provider()
    with serve(handle) as server:  # type: ignore[arg-type]
        (tmp_path / ".env").write_text(
            "# the provider and conli's settings, as a user keeps them\n"
            "CONLI_LLM=openai:from-dotenv\n"
            f"OPENAI_BASE_URL={server.url}/v1\n"
            "OPENAI_API_KEY=sk-dotenv\n"
            "CONLI_MITIGATE=true\n", "utf-8")
        environment = {k: v for k, v in os.environ.items()
                       if not k.startswith(("CONLI_", "OPENAI_"))}
        environment.update({"PYTHONPATH": str(ROOT / "src"), "CONLI_MITIGATE": "false"})
        done = subprocess.run(
            [sys.executable, "-m", "conli.cli", "check", "--source", "s.txt", "--response",
             "r.txt", "--json", "--no-judge", "--detector", "cot", "--no-cache"],
            cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300,
            stdin=subprocess.DEVNULL)
        asked = server.requests
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["backend"], result["model"]) == ("openai", "from-dotenv")
    assert result["verdict"] == "hallucinated"
    assert result["mitigation"]["status"] == "disabled"  # the environment's false won
    assert set(models) == {"from-dotenv"}
    assert asked[0].headers["authorization"] == "Bearer sk-dotenv"


def test_load_env_file_sets_only_what_is_unset(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CONLI_TEST_DOTENV_A", "CONLI_TEST_DOTENV_B"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("CONLI_TEST_DOTENV_B", "kept")
    (tmp_path / ".env").write_text("CONLI_TEST_DOTENV_A=a\nCONLI_TEST_DOTENV_B=b\n", "utf-8")
    assert load_env_file(tmp_path / ".env") == ["CONLI_TEST_DOTENV_A"]
    assert os.environ["CONLI_TEST_DOTENV_A"] == "a"
    assert os.environ["CONLI_TEST_DOTENV_B"] == "kept"
    assert load_env_file(tmp_path / "none") == []
    (tmp_path / "bad.env").write_bytes(b"CONLI_TEST_DOTENV_A=caf\xe9\n")
    with pytest.raises(ConfigError, match="is not UTF-8"):
        load_env_file(tmp_path / "bad.env")


@pytest.mark.integration
@pytest.mark.parametrize(("host", "url"), [
    (None, "http://localhost:11434/v1"),
    ("", "http://localhost:11434/v1"),
    ("10.1.2.3", "http://10.1.2.3:11434/v1"),
    ("gpu-box:8080", "http://gpu-box:8080/v1"),
    (":9999", "http://localhost:9999/v1"),
    ("http://gpu-box", "http://gpu-box:80/v1"),
    ("https://ollama.example.com/base/", "https://ollama.example.com:443/base/v1"),
    ("[::1]:11434", "http://[::1]:11434/v1"),
])
def test_ollama_host_is_read_as_ollamas_clients_read_it(host: str | None, url: str) -> None:
    assert ollama_url(host) == url


def test_an_ollama_host_that_is_no_host_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="OLLAMA_HOST"):
        ollama_url("ftp://box")


@pytest.mark.integration
def test_ollama_model_goes_to_ollama_host_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    models, handle = _provider()
    with serve(handle) as server:  # type: ignore[arg-type]
        monkeypatch.setenv("OLLAMA_HOST", server.url.removeprefix("http://"))
        backend = get_backend("ollama:bespoke-minicheck", Settings())
        try:
            reply = backend.complete(ModelRequest(
                messages=[{"role": "user", "content": "hello"}], max_tokens=8))
        finally:
            backend.close()
    assert reply.text and models == ["bespoke-minicheck"]


def test_a_connection_error_names_the_url_it_could_not_reach(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{port}")
    backend = get_backend("ollama:bespoke-minicheck", Settings())
    try:
        with pytest.raises(TransientBackendError) as raised:
            backend.complete(ModelRequest(messages=[{"role": "user", "content": "hi"}],
                                          max_tokens=8))
    finally:
        backend.close()
    assert f"could not reach ollama at http://127.0.0.1:{port}/v1/chat/completions" in str(
        raised.value)

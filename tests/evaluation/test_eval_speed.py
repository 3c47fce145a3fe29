"""`conli bench` over a scripted backend: A and B in turn, one model at a time, rows, bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conli.backends import register_backend
from conli.backends.base import Backend, CallUsage, Completion, CompletionRequest, Message
from conli.backends.fake import ScriptedBackend
from conli.cli.app import main
from conli.config import Settings
from tests.support.eval_fakes import respond
from tests.support.paths import ROOT

DATA = ROOT.parent / "shared" / "data"
EVENTS: list[str] = []


def _answer(messages: list[Message]) -> str:
    """eval_fakes' answers for NLI prompts; a count for the rate probes."""
    nli = any("<source>" in m["content"] for m in messages)
    return respond(messages) if nli else ", ".join(str(i) for i in range(1, 60))


class _Tracked(ScriptedBackend):
    """Timed like a model: 500 prompt and 20 generated tokens a second, within max_tokens."""

    def __init__(self, cache: bool) -> None:
        super().__init__(responder=_answer)
        self.label = "A" if not cache else "B"
        EVENTS.append(f"open {self.label}")

    def complete(self, request: CompletionRequest) -> Completion:
        done = super().complete(request)
        generated = min(done.usage.completion_tokens, request.max_tokens)
        prefill, decode = done.usage.prompt_tokens / 500, generated / 20
        usage = CallUsage(prompt_tokens=done.usage.prompt_tokens, completion_tokens=generated,
                          seconds=prefill + decode, prefill_seconds=prefill,
                          decode_seconds=decode)
        return Completion(text=done.text, usage=usage, finish_reason="stop")

    def close(self) -> None:
        EVENTS.append(f"close {self.label}")


def _factory(_arg: str, settings: Settings) -> Backend:
    return _Tracked(settings.local_prompt_cache)


register_backend("benchfake", _factory)


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")
def test_bench_alternates_a_and_b_and_writes_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    monkeypatch.setenv("CONLI_LLM", "benchfake")
    EVENTS.clear()
    out = tmp_path / "speed"
    assert main(["bench", "--dataset", "halueval_qa", "--data-dir", str(DATA), "--limit", "2",
                 "--out", str(out)]) == 0
    # A and B alternate response by response, never two models loaded at once
    pair = ["open A", "close A", "open B", "close B"]
    expected = ["open A", "close A", *pair, *pair, "open A", "close A"]
    assert expected == EVENTS
    report = json.loads((out / "speed.json").read_text())
    rows, summary = report["rows"], report["summary"]
    assert [r["label"] for r in rows].count(True) == 1 and len(rows) == 2
    assert sum(r["A"]["calls"] for r in rows) > sum(r["B"]["calls"] for r in rows)
    for row in rows:
        # A re-checks every tagged entity; B only those the source does not state
        assert row["A"]["calls"] >= row["B"]["calls"] >= 1
        assert row["speedup"] > 0
        # the bound uses the rates A's own calls ran at, beside B on the same response
        assert row["pair_rates"] == pytest.approx(
            {"prefill_tokens_per_s": 500, "decode_tokens_per_s": 20})
        assert row["lower_bound_s"] == pytest.approx(
            row["input_tokens"] / 500 + row["B"]["generated"] / 20)
        # without a prompt cache, B's model reads at least source + response: never under it
        assert row["B"]["prefill_seconds"] + row["B"]["decode_seconds"] >= row["lower_bound_s"]
    assert summary["prefill_tokens_per_s"] > 0 and summary["decode_tokens_per_s"] > 0
    assert summary["rates_measured"]["context_tokens"] > 0
    assert summary["bounds_from_pair_rates"] == 2
    assert report["provenance"]["backend"] == "fake" and report["provenance"]["seed"] == 0
    assert "| A calls |" in (out / "speed.md").read_text()

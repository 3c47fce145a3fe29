"""The specialised checkers (``minicheck``, ``granite-guardian``) as detectors.

``conli check --detector minicheck`` against two scripted OpenAI-compatible servers on
loopback: one answers as Bespoke-MiniCheck-7B does (one token, "Yes" or "No", with its
top log-probabilities), one is ``--llm`` (rewrite and judge). The checker's verdicts,
scores and reasons come through, and ``--llm`` is asked nothing about detection.
Granite Guardian likewise on vLLM's chat-template inputs. The injection table runs
through both with a rule-following fake, and the prompts they send hold no forged markup.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from conli.backends.base import CallUsage, Completion, Message, TokenLogprob
from conli.backends.fake import ScriptedBackend
from conli.cli import app as cli
from conli.config import Settings
from conli.detectors.checkers import Reading
from conli.detectors.chunks import Chunk, chunks_of
from conli.detectors.minicheck import MiniCheck
from conli.errors import ConfigError
from conli.pipeline import Checker
from tests.support.http_fakes import Reply, Request, openai_chat, serve
from tests.support.paths import ROOT
from tests.support.responders import Provider

SOURCE = "Ada Lovelace lived in London. In 1843 she published notes on the Analytical Engine."
RESPONSE = "Ada Lovelace lived in Paris. In 1843 she published notes on the engine."
MINICHECK_SYSTEM = "Determine whether the provided claim is consistent with the corresponding"


def _token(word: str, p_yes: float, yes: str = "Yes", no: str = "No") -> dict[str, Any]:
    """One generated token with Yes/No alternatives as the Chat Completions API sends it."""
    top = [{"token": yes, "logprob": math.log(p_yes), "bytes": None},
           {"token": no, "logprob": math.log(1 - p_yes), "bytes": None}]
    chosen = next(t for t in top if t["token"].strip().lower() == word.strip().lower())
    return {"token": word, "logprob": chosen["logprob"], "bytes": None, "top_logprobs": top}


def _with_logprobs(text: str, tokens: list[dict[str, Any]]) -> dict[str, Any]:
    body = openai_chat(text, completion=len(tokens))
    body["choices"][0]["logprobs"] = {"content": tokens}
    return body


class MiniCheckServer:
    """Answers as Bespoke-MiniCheck-7B: P(Yes) 0.06 for a claim naming Paris, else 0.97."""

    def __init__(self, logprobs: bool = True) -> None:
        self.logprobs = logprobs

    def __call__(self, request: Request) -> Reply:
        user = request.body["messages"][-1]["content"]
        claim = user.split("\nClaim: ", 1)[1]
        p = 0.06 if "Paris" in claim else 0.97
        word = "Yes" if p > 0.5 else "No"
        if not self.logprobs:
            return Reply(200, openai_chat(word, completion=1))
        return Reply(200, _with_logprobs(word, [_token(word, p)]))


class GuardianServer:
    """Answers as Granite Guardian 3.3 (no-think) on vLLM: P(risk) 0.9 for Paris, else 0.02."""

    def __call__(self, request: Request) -> Reply:
        claim = request.body["messages"][-1]["content"]
        risk = 0.9 if "Paris" in claim else 0.02
        word = " yes" if risk > 0.5 else " no"
        tokens = [{"token": t, "logprob": -0.01, "bytes": None, "top_logprobs": []}
                  for t in ("<think>", "\n", "</think>", "\n", "<score>")]
        tokens.append(_token(word, risk, yes=" yes", no=" no"))
        tokens.append({"token": " </score>", "logprob": -0.01, "bytes": None,
                       "top_logprobs": []})
        return Reply(200, _with_logprobs(f"<think>\n</think>\n<score>{word} </score>", tokens))


def _check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
           detector: str, checker: Any, *extra: str) -> tuple[dict[str, Any], Provider, Any]:
    (tmp_path / "source.txt").write_text(SOURCE)
    (tmp_path / "response.txt").write_text(RESPONSE)
    monkeypatch.setenv("CONLI_CACHE_DIR", str(tmp_path / "cache"))
    llm = Provider(lambda t: t.replace("Paris", "London"))  # --llm: rewrites and judges
    with serve(llm) as llm_server, serve(checker) as checker_server:
        monkeypatch.setenv("CONLI_DETECTOR_OPTIONS", json.dumps(
            {detector: {"llm": f"vllm:{checker_server.url}/v1#checker"}}))
        code = cli.main(["check", "--source", str(tmp_path / "source.txt"),
                         "--response", str(tmp_path / "response.txt"), "--json",
                         "--llm", f"vllm:{llm_server.url}/v1#served", "--detector", detector,
                         *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out), llm, checker_server


@pytest.mark.integration
def test_minicheck_flags_what_minicheck_rejects_and_asks_llm_no_detection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    result, llm, server = _check(tmp_path, monkeypatch, capsys, "minicheck", MiniCheckServer())
    first, second = result["sentences"]
    assert [first["verdict"], second["verdict"]] == ["hallucinated", "supported"]
    assert first["score"] == pytest.approx(0.06) and second["score"] == pytest.approx(0.97)
    assert first["score_method"] == second["score_method"] == "logprobs"
    assert first["reasons"][0].startswith(
        f"MiniCheck: P(supported) 0.06; closest: source 0, offsets 0-{len(SOURCE)}")
    assert "Paris" in first["reasons"][0]  # the name the source never states
    # --llm rewrote and judged, and was asked nothing about detection
    assert "nli" not in llm.kinds and "mitigate" in llm.kinds
    assert not {"judge", "reasoning"} & set(llm.kinds)  # grounded: written from its findings
    assert result["judge_raw"]["status"] == "scored"
    assert "London" in result["refined_text"]
    # the checker: one chunk x two claims, then the rewrite verified by the same detector
    asked = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(asked) == 3
    assert all(b["messages"][0]["content"].startswith(MINICHECK_SYSTEM) for b in asked)
    assert f"Document: {SOURCE}\nClaim: Ada Lovelace lived in Paris." in [
        b["messages"][1]["content"] for b in asked]  # (calls run concurrently: any order)
    assert all(b["max_tokens"] == 1 and b["logprobs"] and b["top_logprobs"] for b in asked)
    assert result["usage"]["calls"] == len(asked) + len(llm.kinds)


@pytest.mark.integration
def test_granite_guardian_on_vllm_chat_template_inputs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    result, llm, server = _check(tmp_path, monkeypatch, capsys, "granite-guardian",
                                 GuardianServer(), "--no-judge")
    first, second = result["sentences"]
    assert [first["verdict"], second["verdict"]] == ["hallucinated", "supported"]
    assert first["score"] == pytest.approx(0.1) and second["score"] == pytest.approx(0.98)
    assert first["score_method"] == "logprobs"
    assert first["reasons"][0].startswith("Granite Guardian: P(supported) 0.10; closest: source 0")
    assert llm.kinds == ["mitigate"]  # no detection, no judge (--no-judge)
    body = next(r.body for r in server.requests if r.path.endswith("/chat/completions")
                and "Paris" in r.body["messages"][0]["content"])
    assert body["messages"] == [{"role": "assistant", "content": "Ada Lovelace lived in Paris."}]
    kwargs = body["chat_template_kwargs"]
    assert kwargs["guardian_config"] == {"criteria_id": "groundedness"}
    assert kwargs["think"] is False and kwargs["documents"] == [{"doc_id": "0", "text": SOURCE}]
    assert "continue_final_message" not in body  # the claim is judged, not continued


@pytest.mark.integration
def test_without_logprobs_minicheck_is_verdict_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    result, _, _ = _check(tmp_path, monkeypatch, capsys, "minicheck",
                          MiniCheckServer(logprobs=False), "--no-judge", "--no-mitigate")
    first, second = result["sentences"]
    assert [first["verdict"], second["verdict"]] == ["hallucinated", "supported"]
    assert first["score_method"] == second["score_method"] == "verdict"
    assert "answered No for the source (no log-probabilities)" in first["reasons"][0]


def _yes_no(p_yes: float) -> Completion:
    word = "Yes" if p_yes > 0.5 else "No"
    top = {"Yes": math.log(p_yes), "No": math.log(1 - p_yes)}
    return Completion(text=word, usage=CallUsage(),
                      logprobs=(TokenLogprob(word, top[word], top),))


def test_long_source_is_chunked_and_the_best_chunk_is_the_evidence() -> None:
    sentences = [f"Sentence number {i} says the bridge has {i} arches." for i in range(40)]
    source = " ".join(sentences)
    backend = ScriptedBackend()
    chunks = chunks_of(source, 64, backend)
    assert len(chunks) > 3
    assert [c.text for c in chunks] == [source[c.start:c.end] for c in chunks]
    assert " ".join(c.text for c in chunks) == source  # whole sentences, no overlap, no loss
    assert all(c.text.endswith(".") for c in chunks)

    checker = MiniCheck()
    readings = [Reading(0.1, "no")] * len(chunks)
    readings[2] = Reading(0.8, "yes")
    judged = checker.judgement("The bridge has 9 arches.", readings, chunks, "minicheck.v1")
    assert judged.verdict == "supported" and judged.score == pytest.approx(0.8)
    assert judged.evidence == chunks[2].text and judged.evidence_in_source
    assert f"closest: source 0, offsets {chunks[2].start}-{chunks[2].end}" in judged.reasoning
    assert [c.best for c in judged.chunk_scores or []] == [i == 2 for i in range(len(chunks))]
    single = [Chunk(0, 0, 4, "text")]
    assert checker.judgement("x", [Reading(None, "maybe")], single, "t").verdict == "unverified"


@pytest.mark.slow
@pytest.mark.parametrize("detector", ["minicheck", "granite-guardian"])
def test_injection_cases_through_the_checkers_defuse_forged_markup(detector: str) -> None:
    rows = [json.loads(line) for line in
            (ROOT / "benchmarks" / "data" / "injection" / "cases.jsonl").read_text().splitlines()]
    planted: list[str] = []

    def answer(messages: list[Message]) -> Completion:
        text = messages[-1]["content"]
        claim = text.split("Assistant Message: ")[-1].split("\n<end_of_turn>")[0] \
            if detector != "minicheck" else text.split("\nClaim: ")[-1]
        bad = any(p and p in claim for p in planted)
        # MiniCheck: P(Yes) is support; Granite Guardian: "Yes" is the risk
        return _yes_no(0.1 if bad != (detector != "minicheck") else 0.9)

    backend = ScriptedBackend(responder=answer, logprobs=20)  # type: ignore[arg-type]
    checker = Checker(Settings(llm="fake", detectors=[detector], mitigate=False, judge=False),
                      backend=backend)
    forged = ("<|", "[INST]", "<start_of_turn>", "<end_of_risk_definition>", "</score>")
    try:
        for row in rows:
            planted[:] = [row.get("planted") or ""]
            result = checker.check(row["source"], row["response"],
                                   question=row.get("question"))
            assert result.verdict in ("supported", "hallucinated")
            assert all(s.score is not None for s in result.sentences if s.checked)
    finally:
        checker.close()
    for messages in backend.calls:
        for message in messages:
            content = message["content"]
            for token in forged:
                own = 1 if detector != "minicheck" and token in (
                    "<start_of_turn>", "<end_of_risk_definition>") else 0
                assert content.count(token) == own, (token, content[:200])


@pytest.mark.integration
def test_eval_detect_runs_minicheck_on_a_labelled_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What the dev-set measurement runs: ``conli eval detect --detector minicheck``."""
    rows = [{"id": f"r{i}", "source": SOURCE, "label": bad,
             "response": "Ada Lovelace lived in Paris." if bad else "Ada Lovelace lived in London."}
            for i, bad in enumerate([True, False, True, False])]
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with serve(MiniCheckServer()) as server:
        code = cli.main(["eval", "detect", "--file", str(data), "--llm",
                         f"vllm:{server.url}/v1#checker", "--detector", "minicheck",
                         "--no-cache", "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
    asked = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(asked) == len(rows)  # one chunk x one sentence each, nothing else
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["detectors"] == ["minicheck"]
    scored = results["scores"]["datasets"]["set"]["response"]
    assert scored["balanced_accuracy"] == 1.0 and scored["unverified"] == 0
    assert scored["auroc"]["not_entailed"]["value"] == 1.0  # the checker's P ranks


@pytest.mark.integration
def test_conli_calibrate_fits_a_cut_on_minicheck_scores(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"source": SOURCE, "label": bad,
             "response": f"Ada Lovelace lived in {'Paris' if bad else 'London'}, note {i}."}
            for i, bad in enumerate([True, False] * 12)]
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with serve(MiniCheckServer()) as server:
        spec = f"vllm:{server.url}/v1#checker"
        code = cli.main(["calibrate", "--file", str(data), "--llm", spec, "--detector",
                         "minicheck", "--out", str(tmp_path / "cal.json"), "--no-cache"])
        assert code == 0, capsys.readouterr().err
        stored = json.loads((tmp_path / "cal.json").read_text())
        assert stored["detectors"] == ["minicheck"] and stored["balanced_accuracy_after"] == 1.0
        with Checker(Settings(llm=spec, detectors=["minicheck"], judge=False, mitigate=False,
                              calibration=tmp_path / "cal.json")) as checker:
            result = checker.check(SOURCE, "Ada Lovelace lived in Paris.")
    assert result.calibration is not None and result.verdict == "hallucinated"


def test_ollama_spec_is_its_openai_compatible_endpoint() -> None:
    from conli.backends import get_backend

    backend = get_backend("ollama:bespoke-minicheck", Settings())
    try:
        assert (backend.name, backend.model) == ("ollama", "bespoke-minicheck")
        assert str(backend._client.base_url).rstrip("/") == "http://localhost:11434/v1"  # type: ignore[attr-defined]
    finally:
        backend.close()
    with pytest.raises(ConfigError, match="ollama:bespoke-minicheck"):
        get_backend("ollama:", Settings())


def test_chat_template_inputs_are_refused_where_no_served_template_reads_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from conli.backends import CompletionRequest as ModelRequest
    from conli.backends import get_backend

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    backend = get_backend("openai:gpt-test", Settings())
    try:
        with pytest.raises(ConfigError, match="chat-template inputs"):
            backend.complete(ModelRequest([{"role": "assistant", "content": "x"}], 1,
                                          chat_template_kwargs={"think": False}))
    finally:
        backend.close()

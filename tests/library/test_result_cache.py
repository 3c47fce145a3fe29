"""The result cache (issue 65 item 4): a check already made costs no model call.

Through ``conli check`` and ``conli batch`` (their main, a scripted backend that counts
every call): a second identical check makes 0 calls and says it was cached; a changed
prompt template (its version, or its text), a changed model or ``--no-cache`` makes calls
again; a result that did not complete is never kept; an entry that is torn or tampered
with is a miss, never a result; the cache is bounded on disk, least recently used first.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conli import prompts
from conli.backends import register_backend
from conli.backends.base import Message
from conli.backends.fake import ScriptedBackend
from conli.cli.app import main
from conli.config import Settings
from conli.graph import identity
from conli.pipeline import Checker
from conli.run.cache import ResultCache
from conli.run.request import RunRequest
from tests.support import scripted
from tests.support.responders import claims_of

SOURCE = "The library opened in 1962. It lends books free of charge."
RESPONSE = "The library opened in 1962. It charges FALSE two dollars."
CALLS: list[list[Message]] = []


def _counted(arg: str, _settings: Settings) -> ScriptedBackend:
    """The scripted model, every call kept in ``CALLS``; ``--llm counted:NAME`` serves NAME."""
    answer = scripted.responder()

    def respond(messages: list[Message]) -> str:
        CALLS.append(messages)
        return answer(messages)

    backend = ScriptedBackend(responder=respond, judges_batches=True)
    backend.model = arg or "scripted"
    return backend


def _garbage(arg: str, _settings: Settings) -> ScriptedBackend:
    """Answers every call with a web page; ``garbage-counted:WORD``, only claims with WORD."""
    answer = scripted.responder()

    def respond(messages: list[Message]) -> str:
        CALLS.append(messages)
        if not arg or any(arg in claim for claim in claims_of(messages)):
            return "<html>not an answer</html>"
        return answer(messages)

    return ScriptedBackend(responder=respond, judges_batches=True)


@pytest.fixture(autouse=True)
def cache_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache as a user has it (on by default), in this test's own folder."""
    register_backend("counted", _counted)
    register_backend("garbage-counted", _garbage)
    monkeypatch.delenv("CONLI_RESULT_CACHE", raising=False)
    monkeypatch.setenv("CONLI_RESULT_CACHE_DIR", str(tmp_path / "results"))
    CALLS.clear()
    return tmp_path / "results"


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str,
           llm: str = "counted") -> tuple[dict[str, Any], int]:
    """``conli check --json`` once: its result, and the model calls it made."""
    (tmp_path / "s.txt").write_text(SOURCE, "utf-8")
    (tmp_path / "r.txt").write_text(RESPONSE, "utf-8")
    before = len(CALLS)
    capsys.readouterr()
    assert main(["check", "--source", str(tmp_path / "s.txt"), "--response",
                 str(tmp_path / "r.txt"), "--llm", llm, "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out), len(CALLS) - before


def _findings(result: dict[str, Any]) -> object:
    return [result[k] for k in ("verdict", "sentences", "refined_text", "judge_refined")]


def test_a_second_identical_check_makes_no_model_call_and_says_it_was_cached(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, calls = _check(tmp_path, capsys)
    assert calls > 0 and first["usage"]["calls"] == calls and not first["usage"]["cached"]
    again, calls = _check(tmp_path, capsys)
    assert calls == 0
    assert again["usage"]["cached"] is True and again["usage"]["calls"] == 0
    assert again["usage_by_step"] == {}
    assert _findings(again) == _findings(first) and again["verdict"] == "hallucinated"
    (tmp_path / "s.txt").write_text(SOURCE, "utf-8")
    assert main(["check", "--source", str(tmp_path / "s.txt"), "--response",
                 str(tmp_path / "r.txt"), "--llm", "counted"]) == 0
    assert "from the result cache: 0 model calls" in capsys.readouterr().out


@pytest.mark.parametrize(("changed", "flags"), [
    ("the NLI template's version", ["--no-judge"]),
    ("the rewrite and judge templates' versions", ["--no-judge", "--detector", "cot"]),
])
def test_a_changed_template_version_makes_calls_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        changed: str, flags: list[str]) -> None:
    _, calls = _check(tmp_path, capsys, *flags)
    assert calls > 0 and _check(tmp_path, capsys, *flags)[1] == 0
    if changed == "the NLI template's version":
        monkeypatch.setenv("CONLI_NLI_PROMPT", "v2")  # auto is v1 on a batch-judging backend
    else:
        monkeypatch.setenv("CONLI_PROMPT_LAYOUT", "shared")  # mitigate.v1 -> mitigate.v2
    result, calls = _check(tmp_path, capsys, *flags)
    assert calls > 0 and not result["usage"]["cached"]


def test_a_template_whose_text_changed_makes_calls_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same template version with another text: its contents are in the key."""
    assert _check(tmp_path, capsys)[1] > 0 and _check(tmp_path, capsys)[1] == 0
    edited = tmp_path / "templates"
    shutil.copytree(prompts.TEMPLATE_DIR, edited)
    for template in edited.glob("nli_base.*.jinja"):
        template.write_text(template.read_text("utf-8") + "\n", "utf-8")
    monkeypatch.setattr(prompts, "TEMPLATE_DIR", edited)
    monkeypatch.setattr(identity, "TEMPLATE_DIR", edited)
    result, calls = _check(tmp_path, capsys)
    assert calls > 0 and not result["usage"]["cached"]


def test_another_model_makes_calls_again(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert _check(tmp_path, capsys, llm="counted:model-a")[1] > 0
    assert _check(tmp_path, capsys, llm="counted:model-a")[1] == 0
    result, calls = _check(tmp_path, capsys, llm="counted:model-b")
    assert calls > 0 and result["model"] == "model-b" and not result["usage"]["cached"]


def test_the_same_llm_behind_another_server_is_another_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server a backend calls, as resolved from the environment, is in the key; no key is.

    ``--llm openai:M`` reads ``OPENAI_BASE_URL`` and ``azure:DEPLOYMENT`` its endpoint and
    api-version: the same setting behind another server must not be answered from the cache.
    """
    from conli.backends import get_backend
    from conli.run.cache import canonical

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-secret")
    cache = ResultCache(tmp_path, 1_000_000)

    def key(llm: str, **environment: str) -> tuple[str, bytes]:
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        settings = Settings()
        backend = get_backend(llm, settings)
        try:
            found = identity.model_identity(backend, settings)
        finally:
            backend.close()
        return cache.key(found, "the texts"), canonical(found)

    one = key("openai:gpt-test", OPENAI_BASE_URL="http://one.example/v1")
    assert key("openai:gpt-test", OPENAI_BASE_URL="http://one.example/v1") == one
    assert key("openai:gpt-test", OPENAI_BASE_URL="http://two.example/v1")[0] != one[0]
    hidden = key("openai:gpt-test", OPENAI_BASE_URL="http://user:pw-secret@one.example/v1?k=q")
    assert hidden[0] == one[0]  # the URL's user, password and query: no part of the key
    azure = key("azure:deployment", AZURE_OPENAI_ENDPOINT="https://one.openai.azure.com")
    assert key("azure:deployment", AZURE_OPENAI_ENDPOINT="https://two.openai.azure.com"
               )[0] != azure[0]
    assert key("azure:deployment", CONLI_AZURE_OPENAI_API_VERSION="2025-01-01")[0] != azure[0]
    for _, shown in (one, hidden, azure):
        assert b"secret" not in shown and b"pw" not in shown and b"k=q" not in shown


def test_no_cache_and_the_setting_turn_it_off(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch,
                                              cache_on: Path) -> None:
    assert _check(tmp_path, capsys, "--no-cache")[1] > 0
    assert not cache_on.exists()  # nothing read, nothing kept
    monkeypatch.setenv("CONLI_RESULT_CACHE", "false")
    assert _check(tmp_path, capsys)[1] > 0
    assert _check(tmp_path, capsys)[1] > 0 and not cache_on.exists()


@pytest.mark.parametrize(("llm", "verdict"), [
    ("garbage-counted", "unverified"),
    ("garbage-counted:1962", "hallucinated"),  # one sentence flagged, the other unchecked
])
def test_a_check_that_did_not_complete_is_never_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        llm: str, verdict: str) -> None:
    monkeypatch.setenv("CONLI_NLI_PROMPT", "v1")  # one claim a call, so one can fail alone
    monkeypatch.setenv("CONLI_HOSTED_HYPOTHESES_PER_CALL", "1")
    result, calls = _check(tmp_path, capsys, "--no-mitigate", "--no-judge", llm=llm)
    assert result["verdict"] == verdict and calls > 0
    assert "unverified" in [s["verdict"] for s in result["sentences"]]
    again, calls = _check(tmp_path, capsys, "--no-mitigate", "--no-judge", llm=llm)
    assert calls > 0 and not again["usage"]["cached"]


@pytest.mark.parametrize("damage", ["torn", "tampered", "not a result"])
def test_a_damaged_entry_is_a_miss_never_a_result(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], cache_on: Path, damage: str) -> None:
    first, _ = _check(tmp_path, capsys)
    (entry,) = cache_on.glob("??/*.json")
    stored = json.loads(entry.read_text("utf-8"))
    if damage == "torn":
        entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    elif damage == "tampered":  # valid JSON, a verdict nobody reached
        stored["result"]["verdict"] = "supported"
        entry.write_text(json.dumps(stored), "utf-8")
    else:  # whole and matching its digest, but no result
        stored["result"] = {"verdict": "supported"}
        stored["sha256"] = hashlib.sha256(b'{"verdict":"supported"}').hexdigest()
        entry.write_text(json.dumps(stored), "utf-8")
    again, calls = _check(tmp_path, capsys)
    assert calls > 0 and not again["usage"]["cached"]
    assert again["verdict"] == first["verdict"] == "hallucinated"
    assert _check(tmp_path, capsys)[1] == 0  # the rewritten entry serves again


def _batch(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[
        list[dict[str, Any]], int, str]:
    records = [{"id": f"r{i}", "source": SOURCE,
                "response": f"{RESPONSE if i % 2 else SOURCE} It has {i + 2} floors."}
               for i in range(4)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    out.unlink(missing_ok=True)
    before = len(CALLS)
    capsys.readouterr()
    assert main(["batch", str(tmp_path / "in.jsonl"), str(out), "--mode", "check",
                 "--llm", "counted", "--no-progress", *flags]) == 0
    rows = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    return rows, len(CALLS) - before, capsys.readouterr().err


def test_a_batch_run_again_answers_every_record_from_the_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, calls, _ = _batch(tmp_path, capsys)
    assert calls > 0 and not any(r["result"]["usage"]["cached"] for r in first)
    again, calls, err = _batch(tmp_path, capsys)
    assert calls == 0 and all(r["result"]["usage"] == {**r["result"]["usage"], "calls": 0,
                                                       "cached": True} for r in again)
    assert [r["result"]["verdict"] for r in again] == [r["result"]["verdict"] for r in first]
    assert "0 model calls answered" in err and "4 records from the result cache" in err
    assert _batch(tmp_path, capsys, "--no-cache")[1] == sum(
        r["result"]["usage"]["calls"] for r in first)


def test_the_library_checker_uses_a_cache_only_when_given_one(tmp_path: Path) -> None:
    settings = Settings(llm="counted", judge=False)
    request = RunRequest.of(SOURCE, RESPONSE, limits=settings)
    with Checker(settings) as plain:
        plain.run(request)
        made = len(CALLS)
        plain.run(request)
        assert len(CALLS) == 2 * made  # no cache: every check runs
    cache = ResultCache(tmp_path / "lib", 10**6)
    with Checker(settings, result_cache=cache) as cached:
        cached.run(request)
        result = cached.run(request)
    assert len(CALLS) == 3 * made and result.usage.cached and cache.hits == 1


def test_the_cache_keeps_to_its_size_dropping_the_least_recently_used(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "c", max_bytes=2_500)  # four entries of about 510 bytes
    value = {"text": "x" * 300}
    for n in range(3):
        cache.put(f"{n:064x}", value)
    assert cache.get(f"{0:064x}") == value  # used: now the most recent
    for n in range(3, 6):
        cache.put(f"{n:064x}", value)
    kept = {n for n in range(6) if cache.get(f"{n:064x}") is not None}
    held = sum(p.stat().st_size for p in (tmp_path / "c").glob("??/*.json"))
    assert held <= 2_500 and kept == {0, 3, 4, 5}  # 1 and 2, least recently used, went

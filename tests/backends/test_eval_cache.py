"""CachedBackend: hits skip the model, keys cover every input, errors are never stored."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from conli.backends.base import Backend, CallUsage, Completion, CompletionRequest, Message
from conli.backends.cache import CachedBackend, cache_key
from conli.backends.fake import ScriptedBackend
from conli.errors import TransientBackendError

MESSAGES: list[Message] = [{"role": "user", "content": "hello"}]
ASK = CompletionRequest(MESSAGES, max_tokens=10)


def test_second_identical_call_is_served_from_disk(tmp_path: Path) -> None:
    inner = ScriptedBackend(["first answer", "second answer"])
    cached = CachedBackend(inner, tmp_path)
    assert isinstance(cached, Backend)
    one = cached.complete(ASK)
    two = cached.complete(ASK)
    assert one.text == two.text == "first answer"
    assert len(inner.calls) == 1 and (cached.hits, cached.misses) == (1, 1)
    assert two.usage.seconds == 0.0 and two.usage.cached_tokens == one.usage.prompt_tokens
    # a fresh wrapper (a re-run) over the same folder costs nothing either
    rerun = CachedBackend(ScriptedBackend([]), tmp_path)
    assert rerun.complete(ASK).text == "first answer"


def test_a_hit_costs_nothing_but_remembers_what_the_call_first_took(tmp_path: Path) -> None:
    first = Completion("answer", CallUsage(prompt_tokens=4, completion_tokens=2, seconds=2.5))
    cached = CachedBackend(ScriptedBackend([first]), tmp_path)
    cached.complete(ASK)
    assert cached.replayed_seconds == 0.0  # a miss is timed by its caller, not replayed
    hit = cached.complete(ASK)
    assert hit.usage.seconds == 0.0 and cached.replayed_seconds == 2.5


KEYED = CompletionRequest(MESSAGES, 5, json_schema={"type": "object"})
CHANGED = {"messages": [{"role": "user", "content": "hello!"}], "max_tokens": 6,
           "json_schema": {"type": "array"}, "temperature": 0.5, "top_logprobs": 5, "seed": 7}


@pytest.mark.parametrize("change", ["backend", "model", *CHANGED])
def test_key_depends_on_every_input(change: str) -> None:
    names = {"backend": ("c", "m"), "model": ("b", "n")}.get(change, ("b", "m"))
    request = replace(KEYED, **{change: CHANGED[change]}) if change in CHANGED else KEYED
    assert cache_key("b", "m", KEYED) != cache_key(*names, request)
    assert cache_key("b", "m", KEYED) == cache_key("b", "m", replace(KEYED))


def test_keys_stay_the_names_stored_caches_were_written_under() -> None:
    """Digests computed by the keyword-argument ``cache_key``, before ``CompletionRequest``."""
    messages: list[Message] = [
        {"role": "system", "content": "Rules: judge each claim.", "stable_prefix": 6},
        {"role": "user", "content": '<claim id="0">Paris est la capitale.</claim>'},
    ]
    assert cache_key("fake", "scripted", CompletionRequest(messages, 64)) == (
        "a66537e75016f55721a4385974fe9c0c3030ff5dc92985d3658ae94fcb00df48")
    schema = {"type": "object", "properties": {"verdict": {"type": "string"}}}
    sampled = CompletionRequest(messages, 64, json_schema=schema, temperature=0.7, top_logprobs=5,
                                seed=42)
    assert cache_key("fake", "scripted", sampled) == (
        "a1252b35a63e0da89da0f844f40dadee18da138cfb1f495459fa80e095a00402")


def test_errors_are_not_cached(tmp_path: Path) -> None:
    inner = ScriptedBackend([TransientBackendError("busy"), "ok"])
    cached = CachedBackend(inner, tmp_path)
    with pytest.raises(TransientBackendError):
        cached.complete(ASK)
    assert not list(tmp_path.rglob("*.json"))
    assert cached.complete(ASK).text == "ok"
    assert len(list(tmp_path.rglob("*.json"))) == 1


def test_corrupt_entry_is_redone(tmp_path: Path) -> None:
    cached = CachedBackend(ScriptedBackend(["a", "b"]), tmp_path)
    cached.complete(ASK)
    [entry] = tmp_path.rglob("*.json")
    entry.write_text("{not json")
    assert cached.complete(ASK).text == "b"
    assert json.loads(entry.read_text())["text"] == "b"


def test_concurrent_writers_leave_one_whole_entry(tmp_path: Path) -> None:
    def worker() -> None:
        CachedBackend(ScriptedBackend(responder=lambda m: "x" * 10_000), tmp_path).complete(ASK)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 1 and json.loads(files[0].read_text())["text"] == "x" * 10_000

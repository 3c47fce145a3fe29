"""CachedBackend: hits skip the model, keys cover every input, errors are never stored."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from conli.backends.base import Backend, CallUsage, Completion, Message
from conli.backends.cache import CachedBackend, cache_key
from conli.backends.fake import ScriptedBackend
from conli.errors import TransientBackendError

MESSAGES: list[Message] = [{"role": "user", "content": "hello"}]


def test_second_identical_call_is_served_from_disk(tmp_path: Path) -> None:
    inner = ScriptedBackend(["first answer", "second answer"])
    cached = CachedBackend(inner, tmp_path)
    assert isinstance(cached, Backend)
    one = cached.complete(MESSAGES, max_tokens=10)
    two = cached.complete(MESSAGES, max_tokens=10)
    assert one.text == two.text == "first answer"
    assert len(inner.calls) == 1 and (cached.hits, cached.misses) == (1, 1)
    assert two.usage.seconds == 0.0 and two.usage.cached_tokens == one.usage.prompt_tokens
    # a fresh wrapper (a re-run) over the same folder costs nothing either
    rerun = CachedBackend(ScriptedBackend([]), tmp_path)
    assert rerun.complete(MESSAGES, max_tokens=10).text == "first answer"


def test_a_hit_costs_nothing_but_remembers_what_the_call_first_took(tmp_path: Path) -> None:
    first = Completion("answer", CallUsage(prompt_tokens=4, completion_tokens=2, seconds=2.5))
    cached = CachedBackend(ScriptedBackend([first]), tmp_path)
    cached.complete(MESSAGES, max_tokens=10)
    assert cached.replayed_seconds == 0.0  # a miss is timed by its caller, not replayed
    hit = cached.complete(MESSAGES, max_tokens=10)
    assert hit.usage.seconds == 0.0 and cached.replayed_seconds == 2.5


@pytest.mark.parametrize("change", ["backend", "model", "messages", "max_tokens", "schema",
                                    "temperature", "seed"])
def test_key_depends_on_every_input(change: str) -> None:
    base = {"backend": "b", "model": "m", "messages": MESSAGES, "max_tokens": 5,
            "json_schema": {"type": "object"}, "temperature": 0.0}
    other = dict(base)
    other[{"schema": "json_schema"}.get(change, change)] = {
        "backend": "c", "model": "n", "messages": [{"role": "user", "content": "hello!"}],
        "max_tokens": 6, "schema": {"type": "array"}, "temperature": 0.5, "seed": 7}[change]
    assert cache_key(**base) != cache_key(**other)  # type: ignore[arg-type]
    assert cache_key(**base) == cache_key(**dict(base))  # type: ignore[arg-type]


def test_errors_are_not_cached(tmp_path: Path) -> None:
    inner = ScriptedBackend([TransientBackendError("busy"), "ok"])
    cached = CachedBackend(inner, tmp_path)
    with pytest.raises(TransientBackendError):
        cached.complete(MESSAGES, max_tokens=10)
    assert not list(tmp_path.rglob("*.json"))
    assert cached.complete(MESSAGES, max_tokens=10).text == "ok"
    assert len(list(tmp_path.rglob("*.json"))) == 1


def test_corrupt_entry_is_redone(tmp_path: Path) -> None:
    cached = CachedBackend(ScriptedBackend(["a", "b"]), tmp_path)
    cached.complete(MESSAGES, max_tokens=10)
    [entry] = tmp_path.rglob("*.json")
    entry.write_text("{not json")
    assert cached.complete(MESSAGES, max_tokens=10).text == "b"
    assert json.loads(entry.read_text())["text"] == "b"


def test_concurrent_writers_leave_one_whole_entry(tmp_path: Path) -> None:
    def worker() -> None:
        CachedBackend(ScriptedBackend(responder=lambda m: "x" * 10_000), tmp_path).complete(
            MESSAGES, max_tokens=10)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 1 and json.loads(files[0].read_text())["text"] == "x" * 10_000

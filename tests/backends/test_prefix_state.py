"""The embedded backend's saved prefix states: a unique file per save, and a save that fails is
only a missed speed-up (``LocalBackend.prime`` falls back to the slot it prefilled).

No model runs: ``save_state`` is tested alone, and ``prime`` on ``LocalBackend`` objects whose
in-process llama.cpp server is replaced by a fake one. The fake answers completions in
Python and slot saves over HTTP on a loopback port, as llama.cpp does: it writes the file it
is named in the state folder, in pieces, so two saves at once would interleave in one file.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from conli.backends.local import LocalBackend, save_state

MESSAGES: list[Any] = [{"role": "system", "content": "the static prefix"}]


def test_a_save_lands_whole_under_its_name_and_leaves_no_temp_file(tmp_path: Path) -> None:
    names: list[str] = []

    def save(name: str) -> bool:
        names.append(name)
        (tmp_path / name).write_bytes(b"state")
        return True

    assert save_state(tmp_path / "prefix-a.bin", save)
    assert save_state(tmp_path / "prefix-a.bin", save)
    assert names[0] != names[1]  # unique per call, not per process
    assert [p.name for p in tmp_path.iterdir()] == ["prefix-a.bin"]


@pytest.mark.parametrize("failure", ["save", "replace", "folder"])
def test_a_failed_save_is_false_and_leaves_nothing(tmp_path: Path, failure: str) -> None:
    target = tmp_path / "prefix-a.bin"
    if failure == "replace":  # a folder where the state goes: the rename fails
        (target / "inside").mkdir(parents=True)
    if failure == "folder":
        target = tmp_path / "gone" / "prefix-a.bin"

    def save(name: str) -> bool:
        (tmp_path / name).write_bytes(b"state")
        return failure != "save"

    before = sorted(p.name for p in tmp_path.iterdir())
    assert save_state(target, save) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == before


class _SlotServer(ThreadingHTTPServer):
    """llama.cpp's slot save/restore endpoints over one state folder, one per backend."""

    def __init__(self, state_dir: Path, marker: bytes, both: threading.Barrier) -> None:
        super().__init__(("127.0.0.1", 0), _SlotHandler)
        self.state_dir, self.marker, self.both = state_dir, marker, both
        self.listening_address = f"http://127.0.0.1:{self.server_address[1]}"

    def handle_chat_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        """The prefill: one token, nothing to keep."""
        return {"choices": [{"message": {"content": "x"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 4, "completion_tokens": 1}}


class _SlotHandler(BaseHTTPRequestHandler):
    server: _SlotServer

    def do_POST(self) -> None:
        action = parse_qs(urlparse(self.path).query)["action"][0]
        name = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["filename"]
        path = self.server.state_dir / name
        if action == "save":
            self.server.both.wait(timeout=10)  # both backends save at once
            with path.open("wb") as state:  # as llama.cpp writes: in pieces
                for _ in range(20):
                    state.write(self.server.marker * 64)
                    state.flush()
                    time.sleep(0.005)
        ok = action == "save" or path.is_file()
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        """Quiet."""


def _backend(server: _SlotServer) -> LocalBackend:
    """A ``LocalBackend`` on ``server`` instead of a loaded model (its fields as ``__init__``'s)."""
    backend = LocalBackend.__new__(LocalBackend)
    backend._server = server
    backend._state_dir = server.state_dir
    backend._prompt_cache = True
    backend._identity = ["model.gguf", 1, 2, "0.0", 8192]
    backend._lock = threading.Lock()
    backend._saved = backend._put_back = None
    return backend


@pytest.mark.integration
def test_two_backends_in_one_process_priming_one_prefix_both_fall_through(
        tmp_path: Path) -> None:
    both = threading.Barrier(2)
    servers = [_SlotServer(tmp_path, marker, both) for marker in (b"A", b"B")]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    backends = [_backend(server) for server in servers]
    errors: list[BaseException] = []

    def prime(backend: LocalBackend) -> None:
        try:
            backend.prime(MESSAGES)
        except BaseException as exc:  # handed to the test
            errors.append(exc)

    threads = [threading.Thread(target=prime, args=(b,)) for b in backends]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    assert errors == []
    (state,) = tmp_path.iterdir()  # one state, no temp file left behind
    assert state.name.startswith("prefix-") and state.suffix == ".bin"
    assert state.read_bytes() in (b"A" * 1280, b"B" * 1280)  # one save, whole
    assert all(backend._saved == state.name for backend in backends)

"""Latency the proxy adds per reply: chat calls in a row, through it and straight to the model.

A loopback OpenAI-compatible server with a fixed delay per call stands for a hosted model.
The same N calls go to it directly and through ``conli serve --upstream`` (the app on
uvicorn, in this process), with the openai SDK: plain, and streamed (to the first sentence
out, and to the end). The reply is four sentences ``examples/source.txt`` supports, so
the added time is the check alone; ``--flagged`` adds one it does not support (a rewrite).

    B=benchmarks/experiments/issue-66-proxy/bench_proxy.py
    python $B --calls 10 --delay 1.0              # the embedded model checks
    python $B --calls 20 --delay 1.0 --llm fake   # no model: the overhead alone
    python $B --llm openai:gpt-4o-mini --out benchmarks/results/proxy-latency.json

Reported in seconds (median, p95, mean over the calls): ``direct``, ``proxy`` and their
difference per call, ``added``; ``stream_first`` and ``stream_last``. With ``--llm fake``
each check call takes ``--check-delay`` seconds (default 0): what is left is the proxy's
own work (parsing, the sentence splitter, HTTP).
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import uvicorn

from conli.backends import get_backend
from conli.backends.base import Backend
from conli.backends.fake import ScriptedBackend, reading_responder
from conli.config import Settings
from conli.evaluation.report import git_state
from conli.proxy.app import proxy_mount
from conli.service.app import create_app

ROOT = Path(__file__).resolve().parents[3]
KEY = "bench-key"  # the proxy's service key
SOURCE = (ROOT / "examples" / "source.txt").read_text()
SUPPORTED = ("Millbrook opened a new public swimming pool on Saturday, June 14. The pool cost "
             "2.4 million dollars to build. It has six lanes and a separate shallow pool for "
             "young children. About 800 people visited on the first day.")
FLAGGED = " The pool was designed by an award-winning architecture firm from Boston FALSE."
QUESTION = "What happened in Millbrook?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=10, help="calls in a row per mode")
    parser.add_argument("--delay", type=float, default=1.0,
                        help="seconds the fake upstream takes per reply (a hosted model's)")
    parser.add_argument("--llm", default="local", help="the checker's backend spec; fake: "
                        "a scripted checker taking --check-delay per call")
    parser.add_argument("--check-delay", type=float, default=0.0)
    parser.add_argument("--flagged", action="store_true", help="one sentence to rewrite")
    parser.add_argument("--out", type=Path, help="also write the JSON report here (a .json "
                        "file, or a folder for results.json)")
    args = parser.parse_args()
    reply = SUPPORTED + (FLAGGED if args.flagged else "")
    with upstream_serving(reply, args.delay) as upstream_url:
        settings = Settings(service_api_keys=[KEY], llm="local" if args.llm == "fake" else args.llm,
                            proxy_upstream=f"vllm:{upstream_url}/v1#hosted",
                            service_timeout_seconds=1800, check_deadline_seconds=1800)
        checker: Backend = ScriptedBackend(
            responder=reading_responder(sleep=args.check_delay), judges_batches=True,
            max_concurrency=2) if args.llm == "fake" else get_backend(settings.llm, settings)
        with proxy_serving(settings, checker) as base:
            report = measure(openai.OpenAI(base_url=f"{upstream_url}/v1", api_key="x"),
                             openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, timeout=1800),
                             args)
    report |= {"delay": args.delay, "llm": args.llm, "check_delay": args.check_delay,
               "flagged": args.flagged, "reply_chars": len(reply), "machine": platform.node(),
               "python": platform.python_version(), "commit": commit(),
               "date": datetime.now(UTC).isoformat(timespec="seconds")}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:  # a .json file, or a folder (a run's out) to hold results.json
        out = args.out if args.out.suffix == ".json" else args.out / "results.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    return 0


def _chunks(reply: str) -> Iterator[bytes]:
    """``reply`` as Chat Completions stream events, a word each, then the finish and [DONE]."""
    base = {"id": "up", "object": "chat.completion.chunk", "created": 1, "model": "hosted"}
    for i, word in enumerate(reply.split(" ")):
        delta = {"content": word if i == 0 else f" {word}"}
        yield b"data: " + json.dumps({**base, "choices": [
            {"index": 0, "delta": delta, "finish_reason": None}]}).encode() + b"\n\n"
    yield b"data: " + json.dumps({**base, "choices": [
        {"index": 0, "delta": {}, "finish_reason": "stop"}]}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


@contextmanager
def upstream_serving(reply: str, delay: float) -> Iterator[str]:
    """A loopback OpenAI-compatible model answering every chat with ``reply`` after ``delay``."""

    class Upstream(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_GET(self) -> None:  # /v1/models
            self._send(json.dumps({"object": "list", "data": [
                {"id": "hosted", "object": "model", "created": 0, "owned_by": "bench"}]}).encode())

        def do_POST(self) -> None:  # /v1/chat/completions
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            time.sleep(delay)
            if body.get("stream"):
                self._send(b"".join(_chunks(reply)), "text/event-stream")
                return
            self._send(json.dumps({
                "id": "up", "object": "chat.completion", "created": 1, "model": "hosted",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply}}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 40,
                          "total_tokens": 70}}).encode())

        def _send(self, data: bytes, kind: str = "application/json") -> None:
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@contextmanager
def proxy_serving(settings: Settings, checker: Backend) -> Iterator[str]:
    """``conli serve --upstream``'s app on uvicorn in a thread, on a loopback port."""
    app = create_app(settings, backend=checker, mount=proxy_mount(settings))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def measure(direct: openai.OpenAI, proxy: openai.OpenAI, args: argparse.Namespace
            ) -> dict[str, Any]:
    """N calls a mode, after one warm-up call each (the model loaded, the splitter built)."""
    body: dict[str, Any] = {"model": "hosted", "messages": [{"role": "user", "content": QUESTION}]}
    guarded = {**body, "extra_body": {"conli": {"sources": [SOURCE]}}}
    direct.chat.completions.create(**body)
    first = proxy.chat.completions.create(**guarded)
    plain, straight, firsts, lasts = [], [], [], []
    for _ in range(args.calls):
        straight.append(timed(lambda: direct.chat.completions.create(**body)))
        plain.append(timed(lambda: proxy.chat.completions.create(**guarded)))
        started, first_piece = time.perf_counter(), None
        for chunk in proxy.chat.completions.create(**guarded, stream=True):
            if first_piece is None and chunk.choices and chunk.choices[0].delta.content:
                first_piece = time.perf_counter() - started
        firsts.append(first_piece or 0.0)
        lasts.append(time.perf_counter() - started)
    return {"calls": args.calls, "verdict": first.conli["verdict"],  # type: ignore[attr-defined]
            "action": first.conli["action"],  # type: ignore[attr-defined]
            "direct": summary(straight), "proxy": summary(plain),
            "added": summary([p - d for p, d in zip(plain, straight, strict=True)]),
            "stream_first": summary(firsts), "stream_last": summary(lasts)}


def timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": round(statistics.median(ordered), 4), "p95": round(p95, 4),
            "mean": round(statistics.fmean(ordered), 4)}


def commit() -> str:
    """The short commit of the conli that ran, said to be uncommitted where it was."""
    head, dirty = git_state()
    short = head[:7] if head else "unknown"
    return f"uncommitted tree on {short}" if dirty else short


if __name__ == "__main__":
    raise SystemExit(main())

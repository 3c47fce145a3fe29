"""Throughput of ``conli batch``: the local engine against the Ray engine, in one run.

    # from the checkout; DIR = benchmarks/experiments/issue-18-stream-and-batch
    python DIR/bench_batch.py                         # 200 records, a 300 ms loopback server
    python DIR/bench_batch.py --llm local --records 20 --concurrency 1 --actors 1

Default: an OpenAI-compatible server on 127.0.0.1 answers every chat completion (NLI,
editor, judge) with valid JSON after ``--delay`` seconds (``reading_responder``'s answers,
in Chat Completions' wire format); conli reaches it as ``vllm:URL#bench``. It times
``rewrite`` mode on the same records: local batch at each ``--concurrency`` (1 is one
worker), then Ray (a local Ray of ``--ray-cpus`` CPUs, started before the clock) with each
of ``--actors`` at the best local concurrency per actor, and with 2 actors at half of it
(the same total concurrency as the best local run). ``--llm local`` runs the embedded
model instead (no server): with ``--concurrency 1 --actors 1``, local batch with one
worker against Ray with one actor of 2 CPUs, to show Ray's overhead.

For each run: records/s over the whole call (``wall``), seconds to the first record out
(``startup``: Ray starts its actors, each loading conli and its backend) and records/s
after the first records out (``steady``: Ray's start-up left out). Prints a Markdown
table; writes ``bench.json`` and ``bench.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from conli.backends import get_backend
from conli.backends.base import Message
from conli.backends.fake import reading_responder
from conli.batch import local as batch
from conli.batch import ray_actors
from conli.batch import ray_engine as batch_ray
from conli.batch.records import OutLog, Record
from conli.batch.work import make_worker
from conli.config import Settings
from conli.evaluation.report import git_state

ROOT = Path(__file__).resolve().parents[3]
SOURCE = (
    "The Riverside library opened in 1962 on the corner of Mill Street. The city council "
    "runs it with a staff of twelve, and it lends about 80,000 books a year. A new reading "
    "room for children was added in 1998, paid for by a local charity."
)


def records(n: int) -> list[dict[str, Any]]:
    """``n`` records of three sentences; every other one has an unsupported sentence."""
    return [{"id": f"b{i}", "source": SOURCE,
             "response": "The Riverside library opened in 1962. The city council runs it. "
                         + (f"Record {i} says it is FALSE that children have a room."
                            if i % 2 else f"Record {i} notes a reading room for children.")}
            for i in range(n)]


class Server:
    """The loopback server: every chat completion answered after ``delay`` s, ``capacity`` at once.

    It speaks OpenAI's Chat Completions on 127.0.0.1, answering with
    ``conli.backends.fake.reading_responder``'s JSON (valid NLI, editor and judge answers).
    """

    def __init__(self, delay: float, capacity: int | None) -> None:
        self.delay = delay
        self.calls = 0
        answer = reading_responder()
        lock = threading.Lock()
        slots = threading.BoundedSemaphore(capacity) if capacity else None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with lock:
                    outer.calls += 1
                with slots or nullcontext():  # ``capacity`` requests at once
                    time.sleep(outer.delay)
                messages: list[Message] = [{"role": m["role"], "content": m["content"]}
                                           for m in body["messages"]]
                reply = {"id": "bench", "object": "chat.completion", "created": 0,
                         "model": "bench", "usage": {"prompt_tokens": 100,
                                                     "completion_tokens": 20,
                                                     "total_tokens": 120},
                         "choices": [{"index": 0, "finish_reason": "stop", "message": {
                             "role": "assistant", "content": str(answer(messages))}}]}
                payload = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        host, port = self._http.server_address[:2]
        self.url = f"http://{host}:{port}"

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()


@dataclass
class Result:
    """One timed run."""

    engine: str
    actors: int | None
    concurrency: int
    records: int
    errors: int
    seconds: float
    wall: float  # records/s over the whole call
    startup: float  # seconds to the first record out
    steady: float  # records/s after the first records out, to the last


@contextmanager
def write_times() -> Iterator[list[float]]:
    """When each record was written to OUT: both engines write through ``OutLog.write``."""
    times: list[float] = []
    write = OutLog.write

    def timed_write(self: OutLog, record: Record) -> None:
        write(self, record)
        times.append(time.perf_counter())

    OutLog.write = timed_write  # type: ignore[method-assign]
    try:
        yield times
    finally:
        OutLog.write = write  # type: ignore[method-assign]


def timed(engine: str, actors: int | None, concurrency: int, call: Any) -> Result:
    """Run ``call()`` (a batch returning its Summary) and time its records."""
    with write_times() as times:
        started = time.perf_counter()
        summary = call()
        ended = time.perf_counter()
    n = summary.processed
    first = times[0] - started if times else float("nan")
    # records out after the first burst (the records finished together with the first one,
    # e.g. a Ray block), over the time from that burst to the last record
    burst = sum(t <= times[0] + 0.05 for t in times) if times else 0
    span = times[-1] - times[0] if times else 0.0
    steady = (n - burst) / span if span > 0 else float("nan")
    result = Result(engine, actors, concurrency, n, summary.errors, round(ended - started, 2),
                    round(n / (ended - started), 3), round(first, 2), round(steady, 3))
    print(f"  {engine:5} actors={actors or '-':>2} concurrency={concurrency:>3}: "
          f"{result.wall:7.2f} rec/s wall, {result.steady:7.2f} steady, "
          f"first after {result.startup:5.1f}s, errors {result.errors}", flush=True)
    return result


def run_local(settings: Settings, src: Path, work_dir: Path, concurrency: int) -> Result:
    """Local batch at ``concurrency``, into a fresh OUT."""
    out = work_dir / f"local-{concurrency}.jsonl"
    out.unlink(missing_ok=True)
    backend = get_backend(settings.llm, settings)
    try:
        work = make_worker(settings, "rewrite", backend)
        return timed("local", None, concurrency, lambda: batch.run(
            src, out, work, concurrency=concurrency, progress=False))
    finally:
        backend.close()


def run_ray(settings: Settings, src: Path, work_dir: Path, actors: int, concurrency: int,
            cpus_per_actor: float) -> Result:
    """Ray batch with ``actors`` actors of ``concurrency`` records each, into a fresh OUT."""
    out = work_dir / f"ray-{actors}x{concurrency}.jsonl"
    out.unlink(missing_ok=True)
    job = ray_actors.actor_job(settings, "rewrite", concurrency=concurrency,
                               cpus_per_actor=cpus_per_actor)
    return timed("ray", actors, concurrency, lambda: batch_ray.run_ray(
        str(src), out, job, actors=actors, progress=False))


def machine() -> dict[str, Any]:
    """What this ran on."""
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor())
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "load_average_at_start": load}


def table(results: list[Result]) -> str:
    """The Markdown table of ``results``."""
    lines = ["| engine | actors | concurrency (per actor) | records | errors | seconds | "
             "records/s (wall) | first record out (s) | records/s (steady) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.engine} | {r.actors or '-'} | {r.concurrency} | {r.records} | "
                     f"{r.errors} | {r.seconds} | {r.wall} | {r.startup} | {r.steady} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--llm", choices=["server", "local"], default="server",
                        help="server: the loopback server (default); local: the embedded model")
    parser.add_argument("--delay", type=float, default=0.3, help="server seconds per call")
    parser.add_argument("--capacity", type=int, help="server requests at once (default: any)")
    parser.add_argument("--concurrency", default="1,4,8,16,32",
                        help="local concurrencies to try, comma-separated; the best one is "
                             "Ray's per-actor concurrency")
    parser.add_argument("--actors", default="1,2", help="Ray actor counts, comma-separated")
    parser.add_argument("--ray-cpus", type=int, default=2, help="CPUs of the local Ray")
    parser.add_argument("--out", type=Path, help="results folder (default: benchmarks/results/...)")
    args = parser.parse_args()

    embedded = args.llm == "local"
    name = f"bench-batch-{args.records}" + ("-local" if embedded else "")
    out_dir = args.out or ROOT / "benchmarks" / "results" / name
    out_dir.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="conli-bench-batch-"))  # IN and every run's OUT
    src = work_dir / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records(args.records)), encoding="utf-8")

    server = None if embedded else Server(args.delay, args.capacity)
    llm = "local" if embedded else f"vllm:{server.url}/v1#bench"  # type: ignore[union-attr]
    # Calls in flight are limited by the records run at once, not by conli's per-process cap.
    settings = Settings(llm=llm, max_concurrency=256)
    tried = [int(c) for c in args.concurrency.split(",") if c]
    results: list[Result] = []
    started = datetime.now(UTC)
    commit, dirty = git_state()  # the code that runs, read before it runs
    try:
        print(f"{args.records} records, rewrite mode, {llm}", flush=True)
        results += [run_local(settings, src, work_dir, c) for c in tried]
        best = max(results, key=lambda r: r.wall)
        import ray  # the Ray runs come after every local one, so Ray takes no CPU before

        began = time.perf_counter()
        ray.init(num_cpus=args.ray_cpus, include_dashboard=False, logging_level="WARNING")
        ray_start = round(time.perf_counter() - began, 2)
        print(f"  Ray started in {ray_start}s ({args.ray_cpus} CPUs)", flush=True)
        cpus = 2.0 if embedded else args.ray_cpus / max(int(a) for a in args.actors.split(","))
        try:
            for actors in (int(a) for a in args.actors.split(",")):
                results.append(run_ray(settings, src, work_dir, actors, best.concurrency, cpus))
            if not embedded and best.concurrency >= 2 and 2 in {int(a) for a in
                                                                 args.actors.split(",")}:
                results.append(run_ray(settings, src, work_dir, 2, best.concurrency // 2, cpus))
        finally:
            ray.shutdown()
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work_dir, ignore_errors=True)

    report = {
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "commit": commit, "dirty": dirty,
        "date": started.isoformat(timespec="seconds"), "machine": machine(),
        "records": args.records, "mode": "rewrite", "llm": "embedded" if embedded else {
            "server": "loopback OpenAI-compatible (reading_responder)", "delay_s": args.delay,
            "capacity": args.capacity, "calls": server.calls if server else None},
        "ray": {"version": ray.__version__, "cpus": args.ray_cpus, "start_s": ray_start,
                "cpus_per_actor": cpus},
        "best_local_concurrency": best.concurrency,
        "results": [asdict(r) for r in results],
    }
    (out_dir / "bench.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out_dir / "bench.md").write_text(table(results) + "\n", encoding="utf-8")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

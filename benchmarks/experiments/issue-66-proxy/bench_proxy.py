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
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openai

from conli.backends import get_backend
from conli.config import Settings
from conli.evaluation.report import git_state
from conli.proxy.app import proxy_mount

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # tests.*: the loopback upstream, the scripted checker, uvicorn
from tests import scripted  # noqa: E402
from tests.http_fakes import serve  # noqa: E402
from tests.proxy_fakes import chat_handler  # noqa: E402
from tests.test_service import KEY, serving  # noqa: E402

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
    with serve(chat_handler(reply, delay=args.delay)) as upstream:
        settings = Settings(service_api_keys=[KEY], llm="local" if args.llm == "fake" else args.llm,
                            proxy_upstream=f"vllm:{upstream.url}/v1#hosted",
                            service_timeout_seconds=1800, check_deadline_seconds=1800)
        checker = scripted.backend(sleep=args.check_delay, concurrency=2) if args.llm == "fake" \
            else get_backend(settings.llm, settings)
        with serving(settings, backend=checker, mount=proxy_mount(settings)) as base:
            report = measure(openai.OpenAI(base_url=f"{upstream.url}/v1", api_key="x"),
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

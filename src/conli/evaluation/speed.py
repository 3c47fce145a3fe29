"""``conli bench``: the reference call pattern (A) against ours (B) on the same inputs.

A is the CoNLI reference pattern: one chain-of-thought call per hypothesis and per tagged
entity, no reuse of prompt state. B is the default pipeline: the same calls with the
prompt cache and the static prefix restored from disk or prefilled once per process (its
one-time cost is reported apart); ``--score-first`` adds the one-token mode. Both run
detection only, in one process, response by response, and the lower bound of each
response is measured in the same run:
(tokens of source + response) / prefill rate + (tokens B generated) / decode rate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from conli.backends import get_backend
from conli.backends.base import Backend, Message
from conli.config import Settings
from conli.evaluation.detection import stratified_sample
from conli.evaluation.loaders import load_dataset
from conli.models import CheckResult
from conli.pipeline import Checker

_FILLER = "The committee met on Tuesday to review the annual budget and the new proposals. "


def _call(backend: Backend, content: str, max_tokens: int) -> tuple[int, int, float]:
    messages: list[Message] = [{"role": "user", "content": content}]
    done = backend.complete(messages, max_tokens=max_tokens)
    return done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.seconds


def measure_rates(backend: Backend) -> dict[str, float]:
    """Prefill and decode tokens/s of ``backend`` (a cache-free one for prefill)."""
    prompt, _, seconds = _call(backend, _FILLER * 40, max_tokens=1)
    prefill = prompt / seconds
    prompt, generated, seconds = _call(
        backend, "Count from 1 to 200, separated by commas.", max_tokens=96
    )
    decode = generated / (seconds - prompt / prefill)
    return {"prefill_tokens_per_s": prefill, "decode_tokens_per_s": decode}


def text_tokens(backend: Backend, text: str, overhead: int) -> int:
    """Tokens of ``text`` as the model counts them, less the chat template's ``overhead``."""
    with_text, _, _ = _call(backend, text, max_tokens=1)
    return with_text - overhead


def _row(result: CheckResult, seconds: float) -> dict[str, Any]:
    usage = result.usage
    return {
        "calls": usage.calls,
        "prefilled": usage.prompt_tokens - usage.cached_tokens,
        "cached": usage.cached_tokens,
        "generated": usage.completion_tokens,
        "seconds": seconds,
        "verdict": result.verdict,
    }


def run_bench(args: argparse.Namespace) -> int:
    """Run A and B on the sample and write JSON + a Markdown table."""
    ref_settings = Settings(
        mitigate=False, judge=False, score_first=False, local_prompt_cache=False
    )
    our_settings = Settings(mitigate=False, judge=False, score_first=args.score_first)
    reference = Checker(ref_settings, backend=get_backend(ref_settings.llm, ref_settings))
    ours = Checker(our_settings, backend=get_backend(our_settings.llm, our_settings))
    examples = stratified_sample(load_dataset(args.dataset, args.data_dir), args.limit, args.seed)
    rates = measure_rates(reference.backend)
    rates["B_prefix_ready_seconds_once"] = ours.warm_up_seconds
    overhead = _call(reference.backend, "", max_tokens=1)[0]
    rows = []
    for example in examples:
        row: dict[str, Any] = {"id": example.id, "label": example.label}
        for name, checker in (("A", reference), ("B", ours)):
            started = time.perf_counter()
            result = checker.check(example.source, example.response)
            row[name] = _row(result, time.perf_counter() - started)
        row["input_tokens"] = text_tokens(
            reference.backend, f"{example.source}\n{example.response}", overhead
        )
        row["lower_bound_s"] = (
            row["input_tokens"] / rates["prefill_tokens_per_s"]
            + row["B"]["generated"] / rates["decode_tokens_per_s"]
        )
        row["speedup"] = row["A"]["seconds"] / row["B"]["seconds"]
        row["B_over_bound"] = row["B"]["seconds"] / row["lower_bound_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = _summary(rows, rates)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speed.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))
    (args.out / "speed.md").write_text(_markdown(summary, rows))
    print(_markdown(summary, rows))
    return 0


def _summary(rows: list[dict[str, Any]], rates: dict[str, float]) -> dict[str, Any]:
    med = statistics.median
    return {
        **rates,
        "examples": len(rows),
        "median_seconds_A": med(r["A"]["seconds"] for r in rows),
        "median_seconds_B": med(r["B"]["seconds"] for r in rows),
        "median_speedup": med(r["speedup"] for r in rows),
        "median_B_over_lower_bound": med(r["B_over_bound"] for r in rows),
        "max_B_over_lower_bound": max(r["B_over_bound"] for r in rows),
        "verdicts_agree": sum(r["A"]["verdict"] == r["B"]["verdict"] for r in rows),
    }


def _markdown(summary: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [
        "| id | A calls | A prefilled | A s | B calls | B prefilled | B cached | B generated "
        "| B s | bound s | A/B | B/bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = r["A"], r["B"]
        lines.append(
            f"| {r['id']} | {a['calls']} | {a['prefilled']} | {a['seconds']:.1f} | {b['calls']} "
            f"| {b['prefilled']} | {b['cached']} | {b['generated']} | {b['seconds']:.1f} "
            f"| {r['lower_bound_s']:.1f} | {r['speedup']:.1f} | {r['B_over_bound']:.2f} |"
        )
    lines.append("")
    lines += [
        f"- {key}: {value:.2f}" if isinstance(value, float) else f"- {key}: {value}"
        for key, value in summary.items()
    ]
    return "\n".join(lines) + "\n"


def add_bench_parser(subparsers: Any) -> None:
    """Add ``bench``: speed of the reference pattern against ours, on the embedded model."""
    parser = subparsers.add_parser("bench", help="speed: reference call pattern vs ours")
    parser.add_argument("--dataset", default="factcc")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("eval/results/speed"))
    parser.add_argument(
        "--score-first", action="store_true", help="B reads labels from one token first"
    )
    parser.set_defaults(handler=run_bench)

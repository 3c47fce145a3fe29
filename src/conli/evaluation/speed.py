"""``conli bench``: the reference call pattern (A) against ours (B) on the same inputs.

A is the CoNLI reference pattern: one chain-of-thought call per hypothesis and per tagged
entity, no reuse of prompt state. B is the default pipeline: the prompt cache, the static
prefix restored from disk or prefilled once per process (outside the timed checks, its
seconds reported apart), and entity re-checks only for entities the source does not state
word for word (``Settings.entity_recheck``); ``--score-first`` adds the one-token mode.
Both run detection only, in one process (A, then B, response by response), and the lower
bound of each response is measured in the same run:
(tokens of source + response) / prefill rate + (tokens B generated) / decode rate.
The rates come from the server timings of A's calls on the same response, a minute apart
from B (``pair_rates``); a rate probe before and after the run gives a second bound.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from conli.agents.nli import static_prefix
from conli.agents.nli_prompts import nli_prompt
from conli.backends import get_backend
from conli.backends.base import Backend, CompletionRequest, Message
from conli.config import Settings
from conli.errors import BackendError
from conli.evaluation.detection import stratified_sample
from conli.evaluation.loaders import Example, dataset_path, load_dataset
from conli.evaluation.report import git_state, provenance
from conli.files import write_atomically
from conli.models import CheckResult
from conli.pipeline import Checker

_FILLER = "The committee met on Tuesday to review the annual budget and the new proposals. "


def _call(backend: Backend, content: str, max_tokens: int) -> tuple[int, int, float]:
    messages: list[Message] = [{"role": "user", "content": content}]
    done = backend.complete(CompletionRequest(messages, max_tokens=max_tokens))
    return done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.seconds


def measure_rates(backend: Backend, context_tokens: int = 0) -> dict[str, float]:
    """Prefill and decode tokens/s of a cache-free ``backend``, after ~``context_tokens``.

    Decoding slows as the context grows (each new token attends to all before it), so the
    decode rate is read behind a prompt about as long as the workload's calls.
    """
    filler = _FILLER * max(40, context_tokens // 16)
    prompt, _, seconds = _call(backend, filler, max_tokens=1)
    prefill = prompt / seconds
    prompt, generated, seconds = _call(
        backend, filler + "\nNow count from 1 to 200, separated by commas.", max_tokens=96
    )
    decoding = seconds - prompt / prefill
    if generated < 1 or decoding <= 0:
        raise BackendError(
            f"could not measure the decode rate: {generated} tokens in {seconds:.2f} s, of "
            f"which prefill alone should take {prompt / prefill:.2f} s"
        )
    return {"prefill_tokens_per_s": prefill, "decode_tokens_per_s": generated / decoding}


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
        "prefill_seconds": usage.prefill_seconds,
        "decode_seconds": usage.decode_seconds,
        "verdict": result.verdict,
    }


def server_rates(row: dict[str, Any]) -> dict[str, float] | None:
    """Prefill and decode tokens/s from a cache-free run's own server timings, if reported.

    A's calls prefill whole prompts cold and decode behind them, at the context lengths and
    under the output grammar this workload uses, in the same minute as the B run beside it.
    """
    prefill, decode = row["prefill_seconds"], row["decode_seconds"]
    if not prefill or not decode or row["cached"] or not row["generated"]:
        return None
    return {"prefill_tokens_per_s": row["prefilled"] / prefill,
            "decode_tokens_per_s": row["generated"] / decode}


def lower_bound(input_tokens: int, generated: int, rates: dict[str, float]) -> float:
    """Seconds to read source + response once and generate B's tokens, at ``rates``."""
    return (input_tokens / rates["prefill_tokens_per_s"]
            + generated / rates["decode_tokens_per_s"])


@contextmanager
def _loaded(settings: Settings) -> Iterator[Checker]:
    """A checker whose model is freed on exit, so two are never loaded at once."""
    checker = Checker(settings, backend=get_backend(settings.llm, settings))
    try:
        yield checker
    finally:
        checker.close()
        gc.collect()  # the server goes with the last reference


def _timed(checker: Checker, example: Example) -> dict[str, Any]:
    started = time.perf_counter()
    result = checker.check(example.source, example.response)
    return _row(result, time.perf_counter() - started)


def _measure_inputs(examples: list[Example], settings: Settings
                    ) -> tuple[list[int], int, dict[str, float]]:
    """Each response's source + response tokens, a typical prompt length, and rates before."""
    with _loaded(settings) as reference:
        overhead = _call(reference.backend, "", max_tokens=1)[0]
        tokens = [
            text_tokens(reference.backend, f"{e.source}\n{e.response}", overhead)
            for e in examples
        ]
        static = static_prefix(reference.settings)
        prefix = reference.backend.complete(
            CompletionRequest(static, max_tokens=1)).usage.prompt_tokens
        context = prefix + int(statistics.median(tokens))  # a typical call's prompt length
        return tokens, context, measure_rates(reference.backend, context)


def _bound_row(example: Example, n_tokens: int, a: dict[str, Any], b: dict[str, Any],
               run_rates: dict[str, float]) -> dict[str, Any]:
    """One response's A and B, its bound at A's rates (else the run's), and the ratios."""
    pair = server_rates(a)
    bound = lower_bound(n_tokens, b["generated"], pair or run_rates)
    run_bound = lower_bound(n_tokens, b["generated"], run_rates)
    return {
        "id": example.id, "label": example.label, "A": a, "B": b, "input_tokens": n_tokens,
        "pair_rates": pair, "lower_bound_s": bound, "lower_bound_run_rates_s": run_bound,
        "speedup": a["seconds"] / b["seconds"], "B_over_bound": b["seconds"] / bound,
        "B_over_run_bound": b["seconds"] / run_bound,
    }


def run_bench(args: argparse.Namespace) -> int:
    """Run A and B on each response in turn, in one process; write JSON + a Markdown table.

    This machine's speed drifts by tens of percent over an hour (other tenants), so A and
    B alternate response by response and each pair sees the same conditions; measured, the
    same B run 1.45x slower after a 50-minute A phase than alone ten minutes later. One
    model is loaded at a time: a second idle llama.cpp server was measured to slow decoding.
    Model loading and B's static prefix restore happen outside the timed checks (the
    restore's seconds are reported apart).
    """
    git_state()  # the commit this run starts from, not one made while it runs
    examples = stratified_sample(load_dataset(args.dataset, args.data_dir), args.limit, args.seed)
    ref_settings = Settings(
        mitigate=False, judge=False, score_first=False, local_prompt_cache=False,
        entity_recheck="all",
    )
    our_settings = Settings(mitigate=False, judge=False, score_first=args.score_first)
    tokens, context, rates_before = _measure_inputs(examples, ref_settings)
    rows_a, rows_b, restore = [], [], []
    for example in examples:
        with _loaded(ref_settings) as reference:
            rows_a.append(_timed(reference, example))
        with _loaded(our_settings) as ours:
            rows_b.append(_timed(ours, example))
            restore.append(ours.warm_up_seconds)
            backend_name, model = ours.backend.name, ours.backend.model
            used = nli_prompt(ours.settings.nli_prompt)  # the prompt "auto" picked
    with _loaded(ref_settings) as reference:
        rates_after = measure_rates(reference.backend, context)
    # the faster of the two readings makes the bound lower, i.e. harder to come close to
    rates = {key: max(rates_before[key], rates_after[key]) for key in rates_before}
    rows = [_bound_row(*row, rates)
            for row in zip(examples, tokens, rows_a, rows_b, strict=True)]
    summary = _summary(rows, rates)
    summary["B_prefix_restore_seconds_median"] = statistics.median(restore)
    summary["rates_measured"] = {"context_tokens": context, "before": rates_before,
                                 "after": rates_after}
    templates = [used.template("sentence"), used.template("entity")]
    meta = provenance(argv=None, backend=backend_name, model=model,
                      settings=our_settings, templates=templates,
                      data_files=[dataset_path(args.dataset, args.data_dir)], seed=args.seed,
                      limit=args.limit)
    write_atomically(
        args.out / "speed.json",
        json.dumps({"provenance": meta, "summary": summary, "rows": rows}, indent=2) + "\n",
    )
    write_atomically(args.out / "speed.md", _markdown(summary, rows))
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
        "B_within_1.3x_of_bound": sum(r["B_over_bound"] <= 1.3 for r in rows),
        "bounds_from_pair_rates": sum(r["pair_rates"] is not None for r in rows),
        "median_B_over_run_rates_bound": med(r["B_over_run_bound"] for r in rows),
        "max_B_over_run_rates_bound": max(r["B_over_run_bound"] for r in rows),
        "verdicts_agree": sum(r["A"]["verdict"] == r["B"]["verdict"] for r in rows),
    }


def _markdown(summary: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [
        "| id | A calls | A prefilled | A s | B calls | B prefilled | B cached | B generated "
        "| B s | bound s | A/B | B/bound | B/run-rates bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = r["A"], r["B"]
        lines.append(
            f"| {r['id']} | {a['calls']} | {a['prefilled']} | {a['seconds']:.1f} | {b['calls']} "
            f"| {b['prefilled']} | {b['cached']} | {b['generated']} | {b['seconds']:.1f} "
            f"| {r['lower_bound_s']:.1f} | {r['speedup']:.1f} | {r['B_over_bound']:.2f} "
            f"| {r['B_over_run_bound']:.2f} |"
        )
    lines.append("")
    lines += [
        f"- {key}: {value:.2f}" if isinstance(value, float) else f"- {key}: {value}"
        for key, value in summary.items()
    ]
    return "\n".join(lines) + "\n"

"""Faithful generation against its baselines (seed 002 Table 2), on dev sources.

Each method answers each source (HaluEval QA with its question, summarisation without);
every answer is then checked by chain-of-thought NLI (the ``cot`` preset, no rewrite):
faithfulness is the share of its sentences found supported and the grounded judge's score
from those verdicts; informativeness is its sentences and distinct content words. An
abstention counts as 0 sentences and is left out of faithfulness, as in the seed.

Methods share calls through the eval's call cache (abstention, backtracking and FOD start
with greedy's answer and its scores), so an answer's time is its wall time plus what its
replayed calls took when first made: what it costs on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from statistics import mean
from typing import Any

from conli.backends.base import Backend
from conli.backends.cache import CachedBackend
from conli.config import Settings
from conli.evaluation.loaders import Example
from conli.generation import Generation, Method, generate
from conli.judges.grounded import grounded_score
from conli.run.plan import make_plan, options
from conli.signals.lexical import stems


def sources(sets: dict[str, list[Example]], per_set: int) -> list[Example]:
    """The first ``per_set`` distinct sources of each set (questions kept)."""
    chosen = []
    for examples in sets.values():
        seen: set[str] = set()
        for example in examples:
            if example.source not in seen and len(seen) < per_set:
                seen.add(example.source)
                chosen.append(example)
    return chosen


def run(backend: Backend, examples: Sequence[Example], methods: Sequence[Method],
        split: Callable[[str], list[str]], settings: Settings,
        progress: Callable[[int, int], None] | None = None,
        deadline: float | None = None) -> list[dict[str, Any]]:
    """One row per (source, method): the answer, its checked verdicts and its cost.

    No new source is started after ``deadline`` (``time.monotonic()``); every source
    begun gets all its methods, so the methods are compared on the same sources.
    """
    from conli.pipeline import Checker

    checker = Checker(make_plan(settings, options(detectors=["cot"], mitigate=False,
                                                  judge=False)), backend)
    rows = []
    total = len(examples) * len(methods)
    for example in examples:
        if deadline is not None and time.monotonic() > deadline:
            break
        for method in methods:
            replayed = _replayed(backend)
            answer = generate(backend, example.source, split, settings,
                              question=example.question, method=method)
            cost = answer.seconds + _replayed(backend) - replayed
            rows.append(_row(example, answer.model_copy(update={"seconds": cost}), checker))
            if progress is not None:
                progress(len(rows), total)
    return rows


def _replayed(backend: Backend) -> float:
    return backend.replayed_seconds if isinstance(backend, CachedBackend) else 0.0


def _row(example: Example, answer: Generation, checker: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"id": example.id, "dataset": example.dataset,
                           "method": answer.method, "text": answer.text,
                           "abstained": answer.abstained, "seconds": answer.seconds,
                           "samples": answer.samples, "monitor": answer.faithfulness,
                           "sentences": len(answer.sentences),
                           "content_words": len(stems(answer.text))}
    if answer.abstained:
        return {**row, "supported_share": None, "judge": None}
    checked = checker.check(example.source, answer.text, question=example.question)
    claims = [s for s in checked.sentences if s.checked]
    row["supported_share"] = (sum(s.verdict == "supported" for s in claims) / len(claims)
                              if claims else None)
    row["judge"] = grounded_score(checked.sentences)[0]
    return row


def table(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per method: faithfulness, informativeness and time, and content kept against greedy."""
    greedy_words = {r["id"]: r["content_words"] for r in rows if r["method"] == "greedy"}
    greedy_seconds = {r["id"]: r["seconds"] for r in rows if r["method"] == "greedy"}
    out: dict[str, dict[str, Any]] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        answered = [r for r in mine if not r["abstained"]]
        shares = [r["supported_share"] for r in answered if r["supported_share"] is not None]
        kept = [r["content_words"] / greedy_words[r["id"]] for r in mine
                if greedy_words.get(r["id"])]
        slower = [r["seconds"] / greedy_seconds[r["id"]] for r in mine
                  if greedy_seconds.get(r["id"])]
        out[method] = {
            "answers": len(mine), "abstained": len(mine) - len(answered),
            "supported_share": mean(shares) if shares else None,
            "judge": mean(r["judge"] for r in answered) if answered else None,
            "sentences": mean(r["sentences"] for r in mine) if mine else None,
            "content_words": mean(r["content_words"] for r in mine) if mine else None,
            "content_kept_vs_greedy": mean(kept) if kept else None,
            "seconds": mean(r["seconds"] for r in mine) if mine else None,
            "time_vs_greedy": mean(slower) if slower else None,
        }
    return out

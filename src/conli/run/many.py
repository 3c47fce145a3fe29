"""Many (source, response) pairs in one call: ``Checker.check_many`` (and ``conli.score``).

As HHEM's ``predict(pairs)`` and MiniCheck's ``score(docs, claims)``: one result per pair,
in input order, whatever order the checks finish in. A pair is a ``(source, response)``
tuple or a mapping with ``source`` and ``response`` (and optionally ``question`` and
``points``). Checks run ``max_concurrency`` at a time (default ``Settings.max_concurrency``)
with a progress bar on stderr where it is a terminal. A pair that fails (bad input, a backend
error) gets an error result in its place; the others go on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any

from conli.errors import ConfigError, InputError, boundary
from conli.models import CheckResult, PairError, PairResult
from conli.run.inputs import Source

if TYPE_CHECKING:
    from rich.progress import Progress

# A source is one text or its chunks (``Source``): ``(chunks, answer)`` is a pair too.
Pair = tuple[Source, str] | Mapping[str, Any]
_KEYS = frozenset({"source", "response", "question", "points"})


def check_many(
    check: Callable[[Mapping[str, Any]], CheckResult],
    pairs: list[Pair],
    *,
    limit: int,
    progress: bool | None = None,
) -> list[PairResult]:
    """Run ``check`` on every pair's fields; one ``PairResult`` per pair, in input order.

    ``check`` is the checker's, on a plan prepared once for every pair (``Checker.check_many``).
    ``progress``: None shows the bar only when stderr is a terminal.
    """
    if limit < 1:
        raise ConfigError(f"max_concurrency must be at least 1, not {limit}")
    results: list[PairResult | None] = [None] * len(pairs)

    def one(index: int) -> PairResult:
        try:
            result = check(unpack(pairs[index], index))
        except Exception as exc:  # the pair's error takes its place; the others go on
            return failed(index, exc)
        return PairResult(index=index, score=result.support_score, verdict=result.verdict,
                          passed=result.passed, result=result)

    bar = progress_bar(sys.stderr.isatty() if progress is None else progress)
    with bar, ThreadPoolExecutor(max_workers=limit, thread_name_prefix="conli-many") as pool:
        task = bar.add_task("pairs", total=len(pairs))
        futures = {pool.submit(one, i): i for i in range(len(pairs))}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            bar.advance(task)
    return [r for r in results if r is not None]


def pairs_of(pairs: Iterable[Pair]) -> list[Pair]:
    """``pairs`` as a list; ``TypeError`` for one pair (or one text) given in its place.

    ``score(("source", "response"))`` would otherwise check the two texts as two pairs and
    return two error results; it is a mistake in the call, so it fails as one.
    """
    if isinstance(pairs, str | bytes | Mapping) or (
            isinstance(pairs, tuple | list) and len(pairs) == 2
            and all(isinstance(text, str) for text in pairs)):
        shown = "one mapping" if isinstance(pairs, Mapping) else \
            "one text" if isinstance(pairs, str | bytes) else "one (source, response) pair"
        raise TypeError(f"pairs is {shown}, not a list of pairs: pass [pair], e.g. "
                        "conli.score([(source, response)])")
    return list(pairs)


def unpack(pair: object, index: int) -> dict[str, Any]:
    """A pair as ``Checker.check``'s arguments; ``InputError`` for anything else."""
    if isinstance(pair, Mapping):
        unknown = sorted(str(k) for k in pair if k not in _KEYS)
        if unknown or "source" not in pair or "response" not in pair:
            problem = f"unknown keys {unknown}" if unknown else "no source or no response"
            raise InputError(f"pair {index}: {problem}; a pair maps source and response "
                             "(and optionally question and points)")
        return dict(pair)
    if isinstance(pair, tuple | list) and len(pair) == 2:
        return {"source": pair[0], "response": pair[1]}
    raise InputError(f"pair {index} is a {type(pair).__name__}, not a (source, response) "
                     "tuple or a mapping with source and response")


def failed(index: int, error: Exception) -> PairResult:
    """The result in the place of a pair whose check raised ``error``."""
    return PairResult(index=index, error=PairError(
        type=type(error).__name__, kind=boundary(error).slug, message=str(error)))


def progress_bar(enabled: bool) -> Progress:
    """Pairs done out of all, on stderr (rich, as ``conli batch``; imported when used)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]conli"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=Console(stderr=True), disable=not enabled)

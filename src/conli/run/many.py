"""Many (source, response) pairs in one call: ``Checker.check_many`` (and ``conli.score``).

As HHEM's ``predict(pairs)`` and MiniCheck's ``score(docs, claims)``: one result per pair,
in input order, whatever order the checks finish in. A pair is a ``(source, response)``
tuple, a mapping with ``source`` and ``response`` (optionally ``question`` and ``points``;
RAGAS' and DeepEval's names are read too: ``conli.run.table``), a RAGAS sample or a DeepEval
test case; ``pairs`` may also be a pandas DataFrame or an HF dataset, read row by row.
Checks run ``max_concurrency`` at a time (default ``Settings.max_concurrency``) with a
progress bar on stderr where it is a terminal, or a callback of your own. A pair that fails
(bad input, a backend error) gets an error result in its place; the others go on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any

from conli.errors import InputError, boundary
from conli.models import CheckResult, PairError, PairResult
from conli.run.inputs import Source
from conli.run.table import PairResults, as_mapping, fields_of, is_table, table_rows

if TYPE_CHECKING:
    from rich.progress import Progress

# A source is one text or its chunks (``Source``): ``(chunks, answer)`` is a pair too.
Pair = tuple[Source, str] | Mapping[str, Any] | Any
# ``progress``: None (a bar where stderr is a terminal), True/False, or ``(done, total)``.
OnProgress = Callable[[int, int], object]
ProgressChoice = bool | OnProgress | None


class Pairs(list[Any]):
    """The pairs of one call, in order, with the input table's index labels (if any)."""

    def __init__(self, pairs: Iterable[Any], labels: list[Any] | None = None,
                 table: bool = False) -> None:
        super().__init__(pairs)
        self.labels, self.table = labels, table


def check_many(
    check: Callable[[Mapping[str, Any]], CheckResult],
    pairs: Pairs,
    *,
    limit: int,
    progress: ProgressChoice = None,
) -> PairResults:
    """Run ``check`` on every pair's fields; one ``PairResult`` per pair, in input order.

    ``check`` is the checker's, on a plan prepared once for every pair, and ``limit`` its
    bound (``Checker.prepare_many``).
    ``progress``: None shows the bar only when stderr is a terminal; a callable is called
    with ``(done, total)`` as each pair finishes (from the calling thread).
    """
    results: list[PairResult | None] = [None] * len(pairs)

    def one(index: int) -> PairResult:
        try:
            result = check(unpack(pairs[index], index, strict=not pairs.table))
        except Exception as exc:  # the pair's error takes its place; the others go on
            return failed(index, exc)
        return succeeded(index, result)

    callback = progress if callable(progress) else None
    bar = progress_bar(sys.stderr.isatty() if progress is None else
                       callback is None and bool(progress))
    with bar, ThreadPoolExecutor(max_workers=limit, thread_name_prefix="conli-many") as pool:
        task = bar.add_task("pairs", total=len(pairs))
        futures = {pool.submit(one, i): i for i in range(len(pairs))}
        for done, future in enumerate(as_completed(futures), 1):
            results[futures[future]] = future.result()
            bar.advance(task)
            if callback is not None:
                callback(done, len(pairs))
    return PairResults((r for r in results if r is not None), labels=pairs.labels)


def pairs_of(pairs: Iterable[Pair]) -> Pairs:
    """``pairs`` as a list (a table's rows, with its labels); ``TypeError`` for one pair.

    ``score(("source", "response"))`` would otherwise check the two texts as two pairs and
    return two error results; it is a mistake in the call, so it fails as one.
    """
    if is_table(pairs):
        rows, labels = table_rows(pairs)
        return Pairs(rows, labels, table=True)
    if isinstance(pairs, str | bytes | Mapping) or (
            isinstance(pairs, tuple | list) and len(pairs) == 2
            and all(isinstance(text, str) for text in pairs)):
        shown = "one mapping" if isinstance(pairs, Mapping) else \
            "one text" if isinstance(pairs, str | bytes) else "one (source, response) pair"
        raise TypeError(f"pairs is {shown}, not a list of pairs: pass [pair], e.g. "
                        "conli.score([(source, response)])")
    return Pairs(pairs)


def unpack(pair: object, index: int, *, strict: bool = True) -> dict[str, Any]:
    """A pair as ``Checker.check``'s arguments; ``InputError`` for anything else."""
    if isinstance(pair, tuple | list) and len(pair) == 2:
        return {"source": pair[0], "response": pair[1]}
    fields = as_mapping(pair)
    if fields is None:
        raise InputError(f"pair {index} is a {type(pair).__name__}, not a (source, response) "
                         "tuple or a mapping with source and response")
    return fields_of(fields, index, strict=strict)


def succeeded(index: int, result: CheckResult) -> PairResult:
    """The result of a pair whose check completed."""
    return PairResult(index=index, score=result.support_score, verdict=result.verdict,
                      passed=result.passed, result=result)


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

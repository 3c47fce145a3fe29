"""What both ``conli batch`` engines share: the per-record worker, the progress bar, the path check.

``conli.batch.local`` (the local engine) and ``conli.batch.ray_engine`` (the Ray engine)
both build on this module, so neither imports the other's module for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from conli.backends.base import Backend
from conli.batch.records import Record, StopRun, failure, given_points
from conli.batch.tally import CallTally, CountingBackend, tallied
from conli.config import Settings
from conli.errors import (
    AuthenticationError,
    BackendUnavailableError,
    InputError,
    ModelStoreError,
)
from conli.files import ensure_appendable
from conli.pipeline import Checker
from conli.run.cache import ResultCache
from conli.run.doors import Mode, plan_for
from conli.run.plan import RunOptions, options
from conli.run.request import RunRequest

Worker = Callable[[Record], Record]


def make_worker(
    settings: Settings, mode: Mode, backend: Backend, *, with_judge: bool = False
) -> Worker:
    """Build the function that turns one input record into its output record.

    It raises only ``StopRun`` (with the record to write) for an error every later record
    would share. Its calls go through a ``CountingBackend``, so a record that failed still
    says how many model calls it made and how many of them failed. A record the result cache
    holds (``Settings.result_cache``) makes none.
    """
    plan = plan_for(settings, mode, with_judge=with_judge)
    counted = CountingBackend(backend)
    # prepared once: every record runs on its plan
    checker = Checker(plan, backend=counted, result_cache=ResultCache.of(settings))
    entrance: Callable[[RunRequest], BaseModel] = {
        "check": checker.run_check, "rewrite": checker.run_rewrite, "judge": checker.run_judge,
    }[mode]  # the mode's typed entrance, chosen once for the run
    chosen = options(judge=True) if with_judge and mode != "judge" else RunOptions()

    def check(record: Record) -> BaseModel:
        missing = [repr(name) for name in ("source", "response") if name not in record]
        if missing:
            raise InputError(f"the record has no {' and no '.join(missing)} field; each line "
                             "needs id, source and response")
        null = [repr(name) for name in ("source", "response") if record[name] is None]
        if null:
            verb = "is" if len(null) == 1 else "are"
            raise InputError(f"the record's {' and '.join(null)} {verb} null; give the text")
        return entrance(RunRequest.of(
            record["source"], record["response"], question=record.get("question"),
            points=record.get("points"), limits=checker.plan.settings, options=chosen))

    def work(record: Record) -> Record:
        out: Record = {"id": record["id"], "mode": mode, "source": record.get("source"),
                       "response": record.get("response"), **given_points(record)}
        tally = CallTally()
        try:
            result = tallied(tally, lambda: check(record))
        except Exception as exc:
            failed = {**out, **failure(exc), **tally.usage()}
            if _fatal(exc):  # ``run`` writes it and stops: every later record would fail alike
                raise StopRun(failed, exc) from exc
            return failed
        return {**out, "ok": True, "result": result.model_dump(mode="json")}

    return work


def _fatal(error: BaseException) -> bool:
    """A failure every later record would share: stop the run instead of repeating it."""
    return isinstance(error, AuthenticationError | BackendUnavailableError | ModelStoreError)


class _RateColumn(ProgressColumn):
    """Records per second over rich's recent window."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.speed or 0.0:.2f} rec/s", style="progress.data.speed")


def progress_bar(enabled: bool) -> Progress:
    """The stderr progress bar both engines show: records done, rate and ETA."""
    return Progress(
        TextColumn("[bold]conli batch"), BarColumn(), MofNCompleteColumn(), _RateColumn(),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        console=Console(stderr=True), disable=not enabled,
    )


def check_paths(in_path: Path, out_path: Path) -> None:
    """Refuse, before any work, an unreadable IN, IN as OUT, or an OUT that cannot grow."""
    if not in_path.is_file():
        raise InputError(f"cannot read input file {str(in_path)!r}")
    if in_path.resolve() == out_path.resolve():
        raise InputError("input and output must be different files")
    ensure_appendable(out_path)

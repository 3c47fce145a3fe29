"""The Ray engine's actors: what each is sent (``ActorJob``), the run's stop flag, the actor.

Each ``CheckActor`` holds one backend and one ``make_worker`` worker, built from the
driver's own settings and backend factory, and runs a block's records in threads; the
driver (``conli.batch.ray_engine``) reads IN, hands the blocks out and writes OUT.
Ray is imported only here and in the driver.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import ray

from conli import backends
from conli.backends.base import Backend
from conli.batch.records import Record, parse_line, stop_reason, stopped_record
from conli.batch.work import make_worker
from conli.config import Settings
from conli.errors import boundary
from conli.files import json_line
from conli.run.doors import Mode
from conli.run.plan import adjusted

CALLS_PER_ACTOR = 2  # blocks an actor works on at once, so its threads never wait for one


@dataclass(frozen=True)
class ActorJob:
    """What every actor needs to build its backend and worker, exactly as the driver was asked.

    ``factory`` is the backend factory the spec names in the driver's registry, shipped to
    the actors (by reference, or by value for a closure), so a backend the driver's program
    registered is the one the actors build. ``settings`` is the driver's ``Settings``
    object: actors never read their own environment for them.
    """

    settings: Settings
    factory: backends.Factory
    arg: str
    mode: Mode
    with_judge: bool = False
    concurrency: int | None = None
    cpus_per_actor: float = 1.0


def actor_job(settings: Settings, mode: Mode, *, with_judge: bool = False,
              concurrency: int | None = None, cpus_per_actor: float = 1.0) -> ActorJob:
    """The job for ``settings.llm``; an unknown backend is a ``ConfigError``, as locally."""
    factory, arg = backends.backend_factory(settings.llm)
    return ActorJob(settings, factory, arg, mode, with_judge, concurrency, cpus_per_actor)


@ray.remote(num_cpus=0)
class RunFlag:
    """Set by the driver when the run stops; the reader and the actors read it."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        """The run stops: read no further, start no further record."""
        self._set = True

    def is_set(self) -> bool:
        """Whether the run has stopped."""
        return self._set


def flag_is_set(flag: Any) -> bool:
    """Whether ``flag`` (a ``RunFlag`` handle, or None) is set."""
    return flag is not None and bool(ray.get(flag.is_set.remote()))


class CheckActor:
    """A Ray Data actor: one backend and its worker, a block's records run in threads.

    Its threads are shared by the blocks it holds at once (``CALLS_PER_ACTOR``). Every
    record comes back as its OUT line; ``stop`` carries the error that should end the run
    (``make_worker``'s only exceptions), ``broken`` one that kept the actor from starting.
    A record not started before ``run_flag`` was set comes back with no line at all.
    """

    def __init__(self, job: ActorJob, run_flag: Any = None) -> None:
        self._backend: Backend | None = None
        self._flag = run_flag
        self._broken: BaseException | None = None
        limit = job.concurrency or 1
        try:
            settings = _actor_settings(job)
            self._backend = job.factory(job.arg, settings)
            self._work = make_worker(settings, job.mode, self._backend,
                                     with_judge=job.with_judge)
            limit = (job.concurrency or settings.batch_concurrency
                     or self._backend.capabilities.max_concurrency)
        except Exception as exc:  # reported with the first block, raised by the driver
            self._broken = exc
        self._threads = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="conli-ray")

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        """Run one block of input lines; the results keep the block's order."""
        lines = [int(n) for n in batch["line"]]
        items = [parse_line(n, bytes(t)) for n, t in zip(lines, batch["text"], strict=True)]
        results = list(self._threads.map(self._one, lines, items))
        return {"line": lines, "out": [r[0] for r in results], "stop": [r[1] for r in results],
                "broken": [r[2] for r in results]}

    def _one(self, number: int, item: Record | str) -> tuple[bytes, str, str]:
        if self._broken is not None:
            exc = self._broken
            return b"", f"{type(exc).__name__}: {exc}", str(boundary(exc).exit_code)
        if flag_is_set(self._flag):
            return b"", "", ""  # the run stopped before this record began
        if isinstance(item, str):  # pass 1 admitted only readable lines: IN changed since
            return json_line({"id": None, "line": number, "ok": False, "retryable": False,
                              "error": {"type": "InputError", "message": item}}), "", ""
        try:
            return json_line(self._work(item)), "", ""
        except Exception as exc:  # the worker raises only what should stop the run
            return json_line(stopped_record(item, exc)), stop_reason(exc), ""

    def __del__(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        if self._backend is not None:
            self._backend.close()


def _actor_settings(job: ActorJob) -> Settings:
    """The driver's settings; the embedded model's threads follow the CPUs Ray reserved."""
    settings = job.settings
    if "local_threads" in settings.model_fields_set:
        return settings
    threads = max(1, round(job.cpus_per_actor))
    return adjusted(settings, local_threads=threads)

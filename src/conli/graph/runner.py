"""A plan made ready to run (``Prepared``), the ones a checker keeps, and what runs them.

``conli.Checker`` is the one ``CheckRunner``; the stream, built on it from below
(``streaming``), types against this Protocol, so no module imports upward for a type.
``Prepared`` is a plan with the run context and compiled graph it runs with; ``KeptPlans``
holds a checker's last few, and closes the detectors of one it let go of once no check
runs on it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol

from conli.backends.base import Backend
from conli.detectors.base import Deps
from conli.models import CheckResult
from conli.run.context import Progress
from conli.run.inputs import CheckInput
from conli.run.plan import Plan


@dataclass(frozen=True)
class Prepared:
    """A plan made ready on a checker: the run context and compiled graph it runs with.

    Built once (``Checker.prepare``) and run as often as wanted: a stream prepares its
    plan once and runs every sentence on it, so its detectors are built once.
    """

    plan: Plan
    deps: Deps
    graph: Any

    def within(self, seconds: float) -> Prepared:
        """The same run context with at most ``seconds`` left of the deadline."""
        plan = self.plan.within(seconds)
        return self if plan is self.plan else replace(self, plan=plan)


Built = tuple[Deps, Any]  # a run context and the graph it runs


class KeptPlans:
    """The run contexts a checker prepared, the last ``size`` kept; each closed once let go.

    A long-running service sees any mix of per-request options, each a plan with its own
    detectors. One pushed out of the kept ones may still be running a check, or be held by
    a stream between sentences: its detectors (those with a ``close``) close when no check
    runs on it, and again after any later check on it, so nothing a dropped plan opens
    outlives its checks. ``pin`` keeps a checker's own plan until ``close``.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[str, Built] = OrderedDict()
        self._pinned: list[Deps] = []
        self._running: dict[int, int] = {}  # id of a run context: checks running on it
        self._lock = threading.Lock()

    def get(self, key: str, build: Callable[[], Built]) -> Built:
        """The kept run context for ``key`` (the most recent now), else ``build()``'s, kept."""
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
            made = self._kept[key] = build()
            if len(self._kept) > self.size:
                dropped = self._kept.popitem(last=False)[1][0]
                if not self._held(dropped):
                    _close(dropped)
            return made

    def pin(self, deps: Deps) -> None:
        """Keep ``deps`` (the checker's own) open whatever else is kept, until ``close``."""
        with self._lock:
            self._pinned.append(deps)

    @contextmanager
    def running(self, deps: Deps) -> Iterator[None]:
        """Count one check on ``deps`` while it runs; a let-go context closes after the last."""
        with self._lock:
            self._running[id(deps)] = self._running.get(id(deps), 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._running.pop(id(deps)) - 1
                if left:
                    self._running[id(deps)] = left
                elif not self._held(deps):
                    _close(deps)

    def close(self) -> None:
        """Close every kept and pinned run context's detectors (the checker is closing)."""
        with self._lock:
            every = [*self._pinned, *(deps for deps, _ in self._kept.values())]
            self._kept.clear()
            self._pinned.clear()
        for deps in {id(d): d for d in every}.values():
            _close(deps)

    def _held(self, deps: Deps) -> bool:
        """Kept, pinned or running: not to be closed now (called under the lock)."""
        return (id(deps) in self._running or any(deps is d for d in self._pinned)
                or any(deps is d for d, _ in self._kept.values()))


def _close(deps: Deps) -> None:
    """Close each of a run context's detectors that holds something (a ``close`` method)."""
    for detector in deps.detectors.values():
        close = getattr(detector, "close", None)
        if callable(close):
            close()


class CheckRunner(Protocol):
    """What runs checks: ``conli.Checker``, as the front doors below it see it."""

    backend: Backend

    @property
    def plan(self) -> Plan:
        """The runner's own plan, resolved for its backend."""
        ...

    def prepare(self, plan: Plan | None = None) -> Prepared:
        """The run context and graph for ``plan`` (None: the runner's own), kept per plan."""
        ...

    def check(self, source: str, response: str, *, question: str | None = None,
              points: object = None, plan: Plan | Prepared | None = None) -> CheckResult:
        """Validate the texts, then check them."""
        ...

    def run_graph(self, checked: CheckInput, *, plan: Plan | Prepared | None = None,
                  progress: Progress | None = None) -> CheckResult:
        """Run the graph on texts a front door already validated."""
        ...

"""A plan made ready to run (``Prepared``), and what runs it (``CheckRunner``).

``conli.Checker`` is the one ``CheckRunner``; the stream, built on it from below
(``streaming``), types against this Protocol, so no module imports upward for a type.
``Prepared`` is a plan with the run context and compiled graph it runs with.
"""

from __future__ import annotations

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

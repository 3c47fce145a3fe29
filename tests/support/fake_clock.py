"""A fake clock for the deadline and the retry waits: no test sleeps or races real time.

``install`` replaces the time ``conli.run.context`` reads deadlines from and the wait ``retry``
sleeps between attempts; a scripted backend advances the clock to stand for slow calls.
"""

from __future__ import annotations

import pytest

from conli.backends import retry
from conli.run import context as run_context


class FakeClock:
    """Monotonic seconds that move only when told (or when a retry waits)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


def install(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """A ``FakeClock`` behind the check's deadline and between retried attempts."""
    fake = FakeClock()
    monkeypatch.setattr(run_context, "time", fake)
    monkeypatch.setattr(retry, "_sleep", fake.sleep)
    return fake

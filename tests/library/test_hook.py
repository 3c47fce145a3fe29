"""The post-edit hook: ``conli.acheck`` and the LangGraph chat example."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from conli import Checker, Settings, acheck
from tests.support import scripted
from tests.support.paths import ROOT


def test_acheck_reuses_a_checker_and_overrides_settings() -> None:
    checker = Checker(Settings(), backend=scripted.backend())
    source = "The library opened in 1962."

    async def both() -> tuple[str, str]:
        full = await acheck(source, "It opened in FALSE 1963.", checker=checker)
        detect = await acheck(source, "It opened in FALSE 1963.", checker=checker,
                              settings=Settings(mitigate=False, judge=False))
        return full.mitigation.status, detect.mitigation.status

    assert asyncio.run(both()) == ("rewritten", "disabled")


@pytest.mark.integration
def test_langgraph_chat_example_runs_offline() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "langgraph_chat_hook.py")],
                          capture_output=True, text=True, timeout=120, check=True)
    assert "flagged:  ['It is run by a private charity.']" in done.stdout
    assert "answer:   The library opened in 1962. It is run by the city council." in done.stdout
    assert "judge:    2 -> 5" in done.stdout

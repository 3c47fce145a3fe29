"""``conli check --fail-on`` and ``--threshold`` / ``CONLI_THRESHOLD``, run as a user runs them.

Each test starts the real CLI in a subprocess without a terminal, on the scripted ``fake``
backend (``tests.support.cli_runner``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

SOURCE = "The library opened in 1962. It lends books free of charge."


def _conli(tmp_path: Path, response: str, *flags: str,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    src, resp = tmp_path / "source.txt", tmp_path / "response.txt"
    src.write_text(SOURCE, encoding="utf-8")
    resp.write_text(response, encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    environment.update({"CONLI_TEST_FAKE": "1", "PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "tests.support.cli_runner", "check", "--source", str(src),
         "--response", str(resp), "--llm", "fake", "--no-judge", "--no-mitigate", *flags],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("response", "fail_on", "code"), [
    ("It charges FALSE two dollars.", None, 0),           # today's codes stand
    ("It charges FALSE two dollars.", "hallucinated", 4),
    ("It lends books free of charge.", "hallucinated", 0),
    ("It lends books free of charge.", "unverified", 0),
])
def test_fail_on_sets_the_exit_code_from_the_verdict(
        tmp_path: Path, response: str, fail_on: str | None, code: int) -> None:
    done = _conli(tmp_path, response, "--json", *(["--fail-on", fail_on] if fail_on else []))
    assert done.returncode == code, done.stderr
    result = json.loads(done.stdout)  # the report is written whatever the gate says
    assert result["passed"] is (result["verdict"] == "supported")
    if code == 4:
        assert f"--fail-on {fail_on} failed: a checked result did not pass" in done.stderr
        assert "here: verdict hallucinated" in done.stderr


@pytest.mark.parametrize(("fail_on", "code"), [("hallucinated", 0), ("unverified", 4)])
def test_an_unverified_check_fails_only_fail_on_unverified(
        tmp_path: Path, fail_on: str, code: int) -> None:
    done = _conli(tmp_path, "It lends UNSURE books.", "--detector", "scored",
                  "--fail-on", fail_on)
    assert done.returncode == code, done.stderr
    assert done.stdout.startswith("verdict: unverified")


def test_threshold_sets_passed_and_the_gate(tmp_path: Path) -> None:
    response = "It opened in 1962 score90. It lends books score60."
    done = _conli(tmp_path, response, "--detector", "scored", "--threshold", "0.7",
                  "--fail-on", "hallucinated")
    assert done.returncode == 4, done.stderr
    assert "threshold 0.7 not passed" in done.stderr
    assert "passed: no (support score 0.6 by classifier, threshold 0.7 not passed)" in done.stdout
    assert done.stdout.startswith("verdict: supported")
    lower = _conli(tmp_path, response, "--detector", "scored", "--json",
                   "--fail-on", "hallucinated", env={"CONLI_THRESHOLD": "0.5"})
    assert lower.returncode == 0, lower.stderr
    result = json.loads(lower.stdout)
    assert (result["passed"], result["threshold"], result["support_score"]) == (True, 0.5, 0.6)


def test_a_threshold_outside_0_1_is_a_settings_error(tmp_path: Path) -> None:
    done = _conli(tmp_path, "It lends books.", "--threshold", "1.5")
    assert done.returncode == 2 and "threshold" in done.stderr
    assert done.stdout == ""

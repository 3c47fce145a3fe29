"""A misspelt ``CONLI_*`` variable is named once, with the setting it was probably meant to be.

``CONLI_DETECTOR=cot`` (the setting is ``CONLI_DETECTORS``) used to be ignored without a
word. It is still ignored, and one ``UnknownSettingWarning`` a process names it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from conli import config
from conli.config import Settings
from conli.errors import UnknownSettingWarning
from tests.support.paths import ROOT


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No variable named yet in this process, and none of the caller's ``CONLI_*``."""
    monkeypatch.setattr(config, "_named", set())
    for name in [n for n in os.environ if n.upper().startswith("CONLI_")]:
        monkeypatch.delenv(name)


def _warnings_of(build: type[Settings]) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        build()
    return [str(w.message) for w in seen if issubclass(w.category, UnknownSettingWarning)]


def test_a_misspelt_setting_is_named_once_with_the_closest_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONLI_DETECTOR", "cot")
    monkeypatch.setenv("CONLI_JUDGE_MOD", "rubric")
    assert _warnings_of(Settings) == [
        "CONLI_DETECTOR is not a conli setting and is ignored; did you mean CONLI_DETECTORS?",
        "CONLI_JUDGE_MOD is not a conli setting and is ignored; did you mean CONLI_JUDGE_MODE?",
    ]
    assert _warnings_of(Settings) == []  # once a process, however often settings are read
    assert Settings().detectors == ["auto"]  # still ignored


def test_a_name_like_no_setting_points_to_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONLI_ZZQX", "1")
    assert _warnings_of(Settings) == [
        "CONLI_ZZQX is not a conli setting and is ignored (the settings: docs/settings.md)"]


@pytest.mark.parametrize(("variable", "value"), [
    ("CONLI_DETECTORS", '["cot"]'),
    ("conli_judge", "false"),  # read whatever its case, so not unknown
    ("CONLI_DETECTOR_OPTIONS__MYDET__WORD", "x"),  # a part of a nested setting
    ("CONLI_TEST_FAKE", "1"),  # the test suite's own switch
])
def test_real_settings_and_their_parts_are_not_named(
        monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    assert _warnings_of(Settings) == []


@pytest.mark.integration
def test_the_cli_says_it_once_as_one_line(tmp_path: Path) -> None:
    source = tmp_path / "source.txt"
    source.write_text("The library opened in 1962.", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("CONLI_")}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.cli_runner", "check", "--source", str(source),
         "--response", str(source), "--llm", "fake", "--no-judge", "--no-mitigate"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**env, "PYTHONPATH": str(ROOT), "CONLI_TEST_FAKE": "1", "CONLI_DETECTOR": "cot"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "conli: warning: CONLI_DETECTOR is not a conli setting and is ignored; "
        "did you mean CONLI_DETECTORS?"]

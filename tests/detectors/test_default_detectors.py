"""One truth for "the default": `conli check` and `conli eval detect` run the same detectors.

The evaluation puts a call cache in front of the backend. The cache must not change what
``auto`` resolves to (it once hid the model's hidden states, so the default eval measured
``cot`` while ``conli check`` ran ``fused``), and it must replay the reading as it replays
calls.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conli.backends import register_backend
from conli.backends.cache import CachedBackend
from conli.cli import app as cli
from conli.config import Settings
from conli.pipeline import Checker
from tests.support.paths import TESTS
from tests.support.readers import ReadingBackend

FIXTURE = TESTS / "fixtures" / "eval_sample.jsonl"
SOURCE = "The library opened in 1921. It holds 40,000 books. The mayor attended the opening."
RESPONSE = "The library opened in 1921. It holds 90,000 books."
BUILT: list[ReadingBackend] = []


def _factory(_arg: str, _settings: Settings) -> ReadingBackend:
    BUILT.append(ReadingBackend())
    return BUILT[-1]


@pytest.fixture(autouse=True)
def reading_backend() -> None:
    register_backend("reading", _factory)
    BUILT.clear()


def _ran_by_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    (tmp_path / "s.txt").write_text(SOURCE)
    (tmp_path / "r.txt").write_text(RESPONSE)
    assert cli.main(["check", "--source", str(tmp_path / "s.txt"), "--response",
                     str(tmp_path / "r.txt"), "--llm", "reading", "--json", "--no-mitigate",
                     "--no-judge"]) == 0
    result = json.loads(capsys.readouterr().out)
    return list(dict.fromkeys(j["detector"] for s in result["sentences"]
                              for j in s["judgements"]))


def _ran_by_eval(out: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, object]:
    assert cli.main(["eval", "detect", "--file", str(FIXTURE), "--llm", "reading",
                     "--out", str(out), *flags]) == 0
    capsys.readouterr()
    return dict(json.loads((out / "results.json").read_text()))


@pytest.mark.parametrize("cache", [True, False], ids=["cached", "uncached"])
def test_the_default_eval_runs_the_detectors_check_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cache: bool
) -> None:
    by_check = _ran_by_check(tmp_path, capsys)
    flags = ("--cache-dir", str(tmp_path / "cache")) if cache else ("--no-cache",)
    payload = _ran_by_eval(tmp_path / "out", capsys, *flags)
    assert "fused" in by_check
    assert payload["detectors"] == by_check
    assert "# Detection: " + ", ".join(by_check) in (tmp_path / "out" / "results.md").read_text()


def test_auto_resolves_alike_through_the_cache(tmp_path: Path) -> None:
    inner = ReadingBackend()
    direct = Checker(Settings(judge=False), inner)
    cached = Checker(Settings(judge=False), CachedBackend(inner, tmp_path))
    assert direct.settings.detectors == cached.settings.detectors == ["fused"]


def test_a_cached_eval_replays_the_reading_without_a_forward_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ("--cache-dir", str(tmp_path / "cache"))
    first = _ran_by_eval(tmp_path / "one", capsys, *flags)
    assert BUILT[-1].reads and BUILT[-1].calls  # the first run read and asked the model
    again = _ran_by_eval(tmp_path / "two", capsys, *flags)
    assert not BUILT[-1].reads and not BUILT[-1].calls  # the second replayed both
    assert again["scores"] == first["scores"]
    one = (tmp_path / "one" / "predictions.jsonl").read_text().splitlines()
    two = (tmp_path / "two" / "predictions.jsonl").read_text().splitlines()
    features = [[j["features"] for s in json.loads(line)["result"]["sentences"]
                 for j in s["judgements"] if j["detector"] == "fused"] for line in one]
    assert any(features) and features == [
        [j["features"] for s in json.loads(line)["result"]["sentences"]
         for j in s["judgements"] if j["detector"] == "fused"] for line in two]

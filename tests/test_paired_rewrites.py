"""Two rewrite runs paired example by example (``benchmarks/paired_rewrites.py``), by the rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conli.evaluation.rule import Paired, decide

ROOT = Path(__file__).resolve().parents[1]


def _run(folder: Path, clean: list[bool], judge: list[int]) -> Path:
    folder.mkdir()
    rows = [{"dataset": f"set{i % 2}", "example_id": str(i), "label": True, "clean": c,
             "judge_refined": j, "rouge_l_vs_raw": 0.5, "refined": f"text {c} {j}"}
            for i, (c, j) in enumerate(zip(clean, judge, strict=True))]
    (folder / "rewrites.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_a_mean_is_decided_on_one_class_sets() -> None:
    """Rewrites are of hallucinated texts only: the mean metric keeps one-class sets."""
    sets = {"a": Paired([True] * 20, [1.0] * 20, [0.0] * 20)}
    decision = decide(sets, "mean", draws=200)
    assert decision.mean.point == 1.0 and decision.mean.low == 1.0 and decision.wins


def test_a_speed_change_holds_only_without_a_cost_beyond_a_point() -> None:
    """The safety-and-speed rule: level is fine, a point estimate below -1 point is not."""
    level = decide({"a": Paired([True] * 20, [1.0] * 20, [1.0] * 20)}, "mean", draws=200)
    worse = decide({"a": Paired([True] * 20, [0.0] + [1.0] * 19, [1.0] * 20)}, "mean",
                   draws=200)
    assert level.holds and not level.wins
    assert round(worse.mean.point, 6) == -0.05 and worse.mean.high >= 0 and not worse.holds


def test_the_script_pairs_two_runs(tmp_path: Path) -> None:
    current = _run(tmp_path / "own", [False] * 12, [1] * 12)
    candidate = _run(tmp_path / "shared", [True] * 12, [5] * 12)
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "paired_rewrites.py"),
                           "--candidate", str(candidate), "--current", str(current),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    assert result["decisions"]["clean"]["mean"]["gain"] == 1.0
    assert result["decisions"]["judge"]["mean"]["gain"] == 1.0
    assert result["decisions"]["kept"]["mean"]["gain"] == 0.0
    assert result["refined texts that differ"] == 12

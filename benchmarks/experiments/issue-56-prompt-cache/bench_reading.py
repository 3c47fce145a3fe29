"""The reading through the prompt cache against the forward passes, paired in one process.

    python benchmarks/experiments/issue-56-prompt-cache/bench_reading.py \\
        --data-dir ../shared/data --out benchmarks/results/reading-speed

Issue 56.2's speed figures, every arm on one embedded model in one process, one after the
other (read the seconds against each other, not against another day's):

- **detection** on the three longest sources of the speed table's sample
  (``conli bench --dataset halueval_summarization --limit 20 --seed 0``): ``cot``, ``fused``
  and ``fast``, each reading forward (two passes through the embedding path) and through
  the cache (``CONLI_READING=cache``); no rewrite, no judge. Reported: wall seconds per arm
  and the ratios fused/cot and fast/cot.
- **the README demo** (``examples/``, rewrite and judge on, as ``conli check`` runs it) with
  each reading: wall seconds and the prompt tokens prefilled anew by step.

Each arm gets a backend of its own, as a fresh process would: llama.cpp keeps earlier
prompts in host memory as well as in its slot, so an arm sharing a backend with the one
before it would find that arm's source (and its rewrite and judge prompts) there. The
static prefix's saved state is restored from disk, as in a fresh process. Writes
``results.json`` and ``results.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any

from conli.config import Settings
from conli.evaluation.detection import stratified_sample
from conli.evaluation.loaders import load_dataset
from conli.evaluation.report import git_state, publish
from conli.pipeline import Checker

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout

ARMS = (("cot", "forward"), ("fused", "forward"), ("fused", "cache"),
        ("fast", "forward"), ("fast", "cache"))
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def timed(settings: Settings, source: str, response: str,
          question: str | None = None) -> dict[str, Any]:
    """One check under ``settings`` on a fresh embedded backend: wall seconds, tokens by step."""
    from conli.backends.local import LocalBackend

    backend = LocalBackend(settings)
    checker = Checker(settings, backend=backend)
    started = time.perf_counter()
    result = checker.check(source, response, question=question)
    wall = time.perf_counter() - started
    backend.close()
    by_step = {step: {"calls": u.calls, "prompt_tokens": u.prompt_tokens,
                      "cached_tokens": u.cached_tokens,
                      "prefilled": u.prompt_tokens - u.cached_tokens,
                      "seconds": round(u.seconds, 2)}
               for step, u in result.usage_by_step.items()}
    return {"wall": round(wall, 2), "by_step": by_step,
            "prefilled": result.usage.prompt_tokens - result.usage.cached_tokens,
            "verdicts": [s.verdict for s in result.sentences if s.checked],
            "timings": {k: round(v, 2) for k, v in result.timings.items()}}


def detection(data_dir: Path) -> list[dict[str, Any]]:
    """The five arms on each of the three longest sources of the speed table's sample."""
    sample = stratified_sample(load_dataset("halueval_summarization", data_dir), 20, 0)
    longest = sorted(sample, key=lambda e: len(e.source), reverse=True)[:3]
    out = []
    for example in longest:
        arms = {}
        for detector, reading in ARMS:
            settings = Settings(detectors=[detector], reading=reading, mitigate=False,
                                judge=False)
            arms[f"{detector}/{reading}"] = timed(settings, example.source, example.response,
                                                  example.question)
            print(example.id, detector, reading, arms[f"{detector}/{reading}"]["wall"],
                  file=sys.stderr, flush=True)
        out.append({"id": example.id, "source_chars": len(example.source),
                    "response_chars": len(example.response), "arms": arms})
    return out


def demo() -> dict[str, Any]:
    """The README demo, rewrite and judge on, in each reading."""
    source = (EXAMPLES / "source.txt").read_text(encoding="utf-8")
    response = (EXAMPLES / "response.txt").read_text(encoding="utf-8")
    return {reading: timed(Settings(reading=reading), source, response)
            for reading in ("forward", "cache")}


def ratio(rows: list[dict[str, Any]], arm: str, base: str) -> float:
    """Summed wall seconds of ``arm`` over those of ``base``."""
    return float(sum(r["arms"][arm]["wall"] for r in rows)
                 / sum(r["arms"][base]["wall"] for r in rows))


def markdown(report: dict[str, Any]) -> str:
    """The detection arms per example, the ratios, and the demo by step."""
    rows = report["detection"]
    names = [f"{d}/{r}" for d, r in ARMS]
    lines = ["| example (source chars) | " + " | ".join(names) + " |",
             "|---" * (len(names) + 1) + "|"]
    for row in rows:
        lines.append(f"| {row['id']} ({row['source_chars']}) | "
                     + " | ".join(f"{row['arms'][n]['wall']:.1f} s, {row['arms'][n]['prefilled']} "
                                  "prefilled" for n in names) + " |")
    lines += ["", "| ratio (summed wall) | forward | cache |", "|---|---|---|"]
    for detector in ("fused", "fast"):
        lines.append(f"| {detector}/cot | {ratio(rows, f'{detector}/forward', 'cot/forward'):.2f}x "
                     f"| {ratio(rows, f'{detector}/cache', 'cot/forward'):.2f}x |")
    steps = sorted({s for arm in report["demo"].values() for s in arm["by_step"]})
    lines += ["", "| README demo step | prefilled anew forward / cache | seconds forward / cache |",
              "|---|---|---|"]
    for step in steps:
        got = [report["demo"][r]["by_step"].get(step, {}) for r in ("forward", "cache")]
        lines.append(f"| {step} | {' / '.join(str(g.get('prefilled', '-')) for g in got)} | "
                     f"{' / '.join(str(g.get('seconds', '-')) for g in got)} |")
    wall = [report["demo"][r]["wall"] for r in ("forward", "cache")]
    fused = [report["demo"][r]["timings"].get("fused", 0.0) for r in ("forward", "cache")]
    lines.append(f"| fused step (reading + weighing) | | {fused[0]} / {fused[1]} |")
    lines.append(f"| **whole check (wall)** | {report['demo']['forward']['prefilled']} / "
                 f"{report['demo']['cache']['prefilled']} | {wall[0]} / {wall[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run every arm on the embedded model and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    report = {"detection": detection(args.data_dir), "demo": demo()}
    return publish(args.out, {"command": " ".join(["python", SCRIPT, *sys.argv[1:]]),
                              "git": git_state(), "machine": platform.processor()
                              or platform.machine(), "result": report}, markdown(report))


if __name__ == "__main__":
    raise SystemExit(main())

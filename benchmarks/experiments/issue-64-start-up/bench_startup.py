"""What a start costs: the commands' start-up, and a first check's overhead beside the models.

    B=benchmarks/experiments/issue-64-start-up/bench_startup.py
    python $B --repeat 5 --out benchmarks/results/startup-after
    python $B --src /path/to/old/checkout/src --out benchmarks/results/startup-before

Issue 64.4. Each figure is taken in a fresh interpreter (``--repeat`` times, the median and
the lowest kept), as wall seconds and as the process's CPU seconds: on a machine others
share, the CPU seconds are the steadier figure. Measured:

- ``conli --version``, ``conli check --help`` and ``import conli; conli.Checker``;
- a first check on a scripted model (``tests.scripted``, no model loaded, no call waits):
  the import, spaCy's pipeline loaded (a model: counted apart), the checker built, the
  first check and a second one. The first check's *overhead beside the models* is the
  whole start to the first result less spaCy's load (no llama.cpp here: the embedded
  model's load is the other model);
- ``python -X importtime`` of ``import conli; conli.Checker`` and of the first check: the
  packages that took longest (their own import time, summed).

``--src`` measures another checkout's ``src`` (the same scripted model from this one's
``tests``). Writes ``startup.json`` and ``startup.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "examples" / "source.txt"
RESPONSE = ROOT / "examples" / "response.txt"
# a snippet's last line on stdout: its phases as JSON; cpu is the process's own CPU time
TIMED = """
import json, sys, time
started, cpu = time.perf_counter(), time.process_time()
{body}
print(json.dumps({{"wall": time.perf_counter() - started, "cpu": time.process_time() - cpu,
                  **phases}}))
"""
COMMANDS = {
    "conli --version": "from conli.cli.app import main\nphases = {}\ntry:\n"
                       "    main(['--version'])\nexcept SystemExit:\n    pass",
    "conli check --help": "import contextlib, io\nfrom conli.cli.app import main\nphases = {}\n"
                          "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n"
                          "        main(['check', '--help'])\n    except SystemExit:\n"
                          "        pass",
    "import conli; conli.Checker": "import conli\nconli.Checker\nphases = {}",
}
FIRST_CHECK = """
def lap(name, since):
    phases[name] = time.perf_counter() - since[0]
    phases[name + "_cpu"] = time.process_time() - since[1]
    return time.perf_counter(), time.process_time()
phases = {}
at = time.perf_counter(), time.process_time()
import conli
from conli.backends.fake import ScriptedBackend
from tests import scripted
at = lap("import", at)
from conli.text.nlp import load_pipeline
load_pipeline()
at = lap("spacy", at)
checker = conli.Checker(conli.Settings(_env_file=None),
                        backend=ScriptedBackend(responder=scripted.responder()))
at = lap("checker", at)
source = open(SOURCE, encoding="utf-8").read()
# the scripted model contradicts a claim holding its flag word: one to rewrite and judge
response = open(RESPONSE, encoding="utf-8").read().replace("4.2", "4.2 " + scripted.FLAG)
checker.check(source, response)
at = lap("first_check", at)
checker.check(source, response)
at = lap("second_check", at)
checker.close()
""".replace("SOURCE", repr(str(SOURCE))).replace("RESPONSE", repr(str(RESPONSE)))


def _environment(src: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    environment["PYTHONPATH"] = os.pathsep.join((str(src), str(ROOT)))
    return environment


def _run(body: str, src: Path, *flags: str) -> tuple[dict[str, float], str]:
    """One fresh interpreter running ``body``: its phases, and its stderr."""
    code = TIMED.format(body=body)
    done = subprocess.run([sys.executable, *flags, "-c", code], cwd=ROOT, env=_environment(src),
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _summary(runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each phase's median and lowest over the runs."""
    return {key: {"median": round(statistics.median(r[key] for r in runs), 3),
                  "min": round(min(r[key] for r in runs), 3)} for key in runs[0]}


def _heaviest(importtime: str, top: int = 12) -> list[tuple[str, float]]:
    """The packages whose modules' own import time (``-X importtime``) sums highest."""
    own: Counter[str] = Counter()
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = (part.strip() for part in line[12:].split("|"))
        own[name.split(".")[0]] += int(self_us)
    return [(name, round(us / 1e6, 3)) for name, us in own.most_common(top)]


def _commit(src: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."],
                           capture_output=True, text=True, check=False).stdout.strip()
    return (done.stdout.strip() + ("+changes" if dirty else "")) if done.returncode == 0 \
        else None


def measure(src: Path, repeat: int) -> dict[str, Any]:
    """Every figure for the checkout at ``src``."""
    load_before = os.getloadavg()
    body = FIRST_CHECK
    figures: dict[str, Any] = {
        name: _summary([_run(code, src)[0] for _ in range(repeat)])
        for name, code in COMMANDS.items()}
    checks = [_run(body, src)[0] for _ in range(repeat)]
    for run in checks:
        run["overhead"] = run["wall"] - run["spacy"]
        run["overhead_cpu"] = run["cpu"] - run["spacy_cpu"]
    figures["first check (scripted model)"] = _summary(checks)
    heaviest = {
        "import conli; conli.Checker": _heaviest(_run(COMMANDS["import conli; conli.Checker"],
                                                      src, "-X", "importtime")[1]),
        "first check (scripted model)": _heaviest(_run(body, src, "-X", "importtime")[1]),
    }
    return {
        "figures": figures, "heaviest_imports": heaviest,
        "meta": {"src": str(src), "commit": _commit(src), "repeat": repeat,
                 "python": platform.python_version(), "machine": platform.machine(),
                 "processor": _processor(), "cpus": os.cpu_count(),
                 "load_average_before": [round(v, 2) for v in load_before],
                 "load_average_after": [round(v, 2) for v in os.getloadavg()],
                 "date": datetime.now(UTC).isoformat(timespec="seconds"),
                 "command": " ".join(sys.argv)},
    }


def _processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def markdown(result: dict[str, Any]) -> str:
    """The figures as a table (median and lowest, wall and CPU seconds)."""
    meta = result["meta"]
    lines = [f"# Start-up, {meta['commit']} ({meta['date']})", "",
             f"{meta['processor']}, {meta['cpus']} CPUs, Python {meta['python']}; load average "
             f"{meta['load_average_before'][0]} before, {meta['load_average_after'][0]} after; "
             f"{meta['repeat']} fresh interpreters each: median (lowest).", "",
             "| what | wall s | CPU s | phases, median: wall s / CPU s |", "|---|---|---|---|"]
    for name, phases in result["figures"].items():
        rest = ", ".join(f"{k} {v['median']:.2f} / {phases[k + '_cpu']['median']:.2f}"
                         for k, v in phases.items()
                         if k not in ("wall", "cpu") and not k.endswith("_cpu"))
        lines.append(f"| {name} | {phases['wall']['median']:.2f} ({phases['wall']['min']:.2f}) "
                     f"| {phases['cpu']['median']:.2f} ({phases['cpu']['min']:.2f}) | {rest} |")
    for name, heavy in result["heaviest_imports"].items():
        lines += ["", f"Heaviest imports, `{name}` (own seconds, -X importtime): "
                  + ", ".join(f"{package} {seconds:.2f}" for package, seconds in heavy)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure, write ``startup.json`` and ``startup.md``, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src",
                        help="the checkout's src folder to measure (default: this one's)")
    parser.add_argument("--repeat", type=int, default=5, help="fresh interpreters per figure")
    parser.add_argument("--out", type=Path, default=None, help="folder for the two files")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = measure(args.src.resolve(), args.repeat)
    result["meta"]["seconds"] = round(time.perf_counter() - started, 1)
    table = markdown(result)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "startup.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
        (args.out / "startup.md").write_text(table, "utf-8")
    print(table, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

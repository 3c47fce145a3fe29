"""``conli check`` as a front door, end to end on the README demo with the scripted backend.

The golden file pins the whole ``--json`` result (minus times and the audit's clock and
commit): a refactor of the rooms behind the command line must not change what users get.
Regenerate it deliberately with ``CONLI_REGENERATE_GOLDEN=1`` after a change that should.
Also: the command loads only what it runs (no evaluation code for ``check``, no LangGraph
for ``--version``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

GOLDEN = ROOT / "tests" / "golden" / "check_demo.json"
VOLATILE = {"timings", "seconds", "judged_at", "commit", "prefill_seconds", "decode_seconds"}

RUN = """
import json, sys
import tests.support.scripted  # registers the scripted `fake` backend
from conli.cli.app import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.startswith(("conli.evaluation", "langgraph")))
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def _run(*args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    # this checkout's conli, not whichever one the interpreter has installed
    environment.update({"CONLI_TEST_FAKE": "1", "CONLI_RESULT_CACHE": "false",
                        "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "src")))})
    done = subprocess.run([sys.executable, "-c", RUN, *args], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    tail = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "{}"
    return done, json.loads(tail) if tail.startswith("{") else {}


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def test_check_json_on_the_demo_matches_the_golden_result() -> None:
    done, seen = _run("check", "--source", "examples/source.txt", "--response",
                      "examples/response.txt", "--llm", "fake", "--json")
    assert done.returncode == 0 and seen.get("code") == 0, done.stderr
    result = _stable(json.loads(done.stdout))
    if os.environ.get("CONLI_REGENERATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", "utf-8")
    assert result == json.loads(GOLDEN.read_text("utf-8"))


def test_check_loads_no_evaluation_code() -> None:
    done, seen = _run("check", "--source", "examples/source.txt", "--response",
                      "examples/response.txt", "--llm", "fake", "--json", "--no-judge")
    assert done.returncode == 0, done.stderr
    assert not [m for m in seen["loaded"] if m.startswith("conli.evaluation")]


def test_version_loads_neither_the_pipeline_nor_langgraph() -> None:
    done, seen = _run("--version")
    assert "conli" in done.stdout
    assert seen == {} or not seen["loaded"]  # argparse exits before the report line
    probe = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom conli.cli.app import parser_for\n"
         "parser_for(['--version'])\nprint(sorted(m for m in sys.modules "
         "if m.startswith(('langgraph', 'conli.pipeline', 'conli.evaluation'))))"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert probe.stdout.strip() == "[]"

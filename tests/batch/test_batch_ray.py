"""conli batch --engine ray: the same records as local batch, an actor killed, resume, the CLI.

One local Ray (2 CPUs) serves the module. Backends are scripted (``tests.support.scripted``): the
actors build them from the factory the driver registered, imported from this module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from conli.backends import register_backend  # noqa: E402
from conli.backends.base import Backend, Message  # noqa: E402
from conli.backends.fake import ScriptedBackend  # noqa: E402
from conli.batch.local import run  # noqa: E402
from conli.batch.ray_actors import actor_job  # noqa: E402
from conli.batch.ray_engine import run_ray  # noqa: E402
from conli.batch.records import record_key  # noqa: E402
from conli.batch.summary import Summary  # noqa: E402
from conli.batch.work import make_worker  # noqa: E402
from conli.config import BackendSettings, Settings  # noqa: E402
from conli.errors import (  # noqa: E402
    AuthenticationError,
    BackendUnavailableError,
    TransientBackendError,
)
from tests.support import scripted  # noqa: E402

pytestmark = pytest.mark.integration

SOURCE = "The Riverside library opened in 1962. The city council runs it."
# this tree's conli (not the installed one) and its tests, in every Ray worker
_ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "CONLI_TEST_FAKE": "1"}


# --- backends the actors build: registered here, imported by each actor ----------------


def _scripted(_arg: str, _settings: BackendSettings) -> Backend:
    return scripted.backend(concurrency=4)


def _dying(arg: str, _settings: BackendSettings) -> Backend:
    """Scripted, but the actor process dies at its first call on a KILL record."""
    marker = Path(arg)
    answer = scripted.responder()

    def respond(messages: list[Message]) -> str:
        if "KILL" in messages[-1]["content"] and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)  # no cleanup, no exception: as if the node lost the process
        return str(answer(messages))

    return ScriptedBackend(responder=respond, judges_batches=True, max_concurrency=4)


_log_lock = threading.Lock()


def _logging(arg: str, _settings: BackendSettings) -> Backend:
    """Scripted, and every call's last message is appended to the file ``arg``."""
    answer = scripted.responder()

    def respond(messages: list[Message]) -> str:
        with _log_lock, open(arg, "a", encoding="utf-8") as log:
            log.write(json.dumps(messages[-1]["content"]) + "\n")
        return str(answer(messages))

    return ScriptedBackend(responder=respond, judges_batches=True, max_concurrency=4)


def _failing(arg: str, _settings: BackendSettings) -> Backend:
    """Fails every call (HTTP 503); with ``arg``, each call is also a line in that file."""

    def respond(messages: list[Message]) -> TransientBackendError:
        if arg:
            with _log_lock, open(arg, "a", encoding="utf-8") as log:
                log.write("call\n")
        return TransientBackendError("HTTP 503: overloaded")

    return ScriptedBackend(responder=respond, judges_batches=True)  # one call per record


def _dead(_arg: str, _settings: BackendSettings) -> Backend:
    return ScriptedBackend(responder=lambda m: AuthenticationError("HTTP 401: bad key"))


def _unbuildable(_arg: str, _settings: BackendSettings) -> Backend:
    raise BackendUnavailableError("the model file is missing")


for _name, _factory in {"ray-scripted": _scripted, "ray-dying": _dying, "ray-logging": _logging,
                        "ray-dead": _dead, "ray-unbuildable": _unbuildable,
                        "ray-failing": _failing}.items():
    register_backend(_name, _factory)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local 2-CPU Ray for the module; its workers can import ``tests``."""
    saved = {key: os.environ.get(key) for key in _ENV}
    os.environ.update(_ENV)  # the raylet, and so every job's workers, inherit them
    try:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING",
                 runtime_env={"env_vars": _ENV})
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


# --- helpers ------------------------------------------------------------------------------


def _records(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "source": SOURCE,
             "response": f"The library opened in 1962. Record {i} is FALSE here."}
            for i in range(start, start + n)]


def _write_jsonl(path: Path, lines: list[Any], tail: str = "") -> None:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text + tail, encoding="utf-8")


def _out(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), "OUT must end on a whole line"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


CLOCKED = ("timings", "seconds", "judged_at")  # what the clock writes, run to run


def _comparable(record: Any) -> Any:
    """A record without what differs from run to run: wall-clock times and timestamps."""
    if isinstance(record, dict):
        return {k: _comparable(v) for k, v in record.items() if k not in CLOCKED}
    if isinstance(record, list):
        return [_comparable(v) for v in record]
    return record


def _ray(src: Path, out: Path, llm: str, mode: str = "rewrite", *, actors: int = 2,
         concurrency: int = 2, **settings: Any) -> Summary:
    plan = actor_job(Settings(llm=llm, **settings), mode,  # type: ignore[arg-type]
                     concurrency=concurrency)
    return run_ray(str(src), out, plan, actors=actors, progress=False)


# --- tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["check", "rewrite"])
def test_ray_writes_what_local_batch_writes_record_for_record(
    cluster: str, tmp_path: Path, mode: str
) -> None:
    src = tmp_path / "in.jsonl"
    records = _records(10)
    _write_jsonl(src, [*records[:4], "this line is not json", "", records[2],
                       {"id": "empty", "source": SOURCE, "response": "  "}, [1, 2],
                       {"id": True, "source": SOURCE, "response": "x"}, *records[4:]],
                 tail='{"id": "torn", "sou')
    local = run(src, tmp_path / "local.jsonl",
                make_worker(Settings(), mode, scripted.backend()),  # type: ignore[arg-type]
                concurrency=2, progress=False)
    distributed = _ray(src, tmp_path / "ray.jsonl", "ray-scripted", mode)

    want = {record_key(r): _comparable(r) for r in _out(tmp_path / "local.jsonl")}
    got = [_comparable(r) for r in _out(tmp_path / "ray.jsonl")]
    assert [record_key(r) for r in got] == list(want)  # each key once, in IN's order
    assert {record_key(r): r for r in got} == want  # same ok/error, verdicts, rewrites
    assert len(want) == 16 and sum(not r["ok"] for r in want.values()) == 6
    assert (distributed.processed, distributed.errors, distributed.outcomes) == (
        local.processed, local.errors, local.outcomes)
    assert distributed.exit_code == local.exit_code == 1


def test_an_actor_killed_mid_block_loses_and_duplicates_nothing(
    cluster: str, tmp_path: Path
) -> None:
    src, out, marker = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "killed"
    records = _records(16)
    records[5]["response"] = "The library opened in 1962. Record 5 KILL is FALSE here."
    _write_jsonl(src, records)

    summary = _ray(src, out, f"ray-dying:{marker}", "check", concurrency=3)

    assert marker.exists(), "the actor was never killed"
    rows = _out(out)
    assert Counter(r["id"] for r in rows) == Counter(r["id"] for r in records)
    assert all(r["ok"] and r["result"]["verdict"] == "hallucinated" for r in rows)
    assert summary.processed == 16 and summary.errors == 0 and summary.exit_code == 0


def test_a_rerun_resumes_and_runs_nothing_twice(cluster: str, tmp_path: Path) -> None:
    src, out, calls = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "calls.log"
    records = _records(12)
    _write_jsonl(src, records)
    # r0-r4 done before (one of them, r4, failed retryably), then a crash tore a line
    first = tmp_path / "first.jsonl"
    _write_jsonl(first, records[:4])
    run(first, out, make_worker(Settings(), "check", scripted.backend()), concurrency=1,
        progress=False)
    with out.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "r4", "ok": False, "retryable": True,
                                 "error": {"type": "TransientBackendError", "message": "503"}})
                     + "\n" + '{"id": "r5", "ok": tr')
    before = out.read_bytes().splitlines()[:4]

    summary = _ray(src, out, f"ray-logging:{calls}", "check")

    assert summary.skipped == 4 and summary.processed == 8 and summary.errors == 0
    rows = _out(out)
    assert out.read_bytes().splitlines()[:4] == before  # done records untouched
    assert Counter(r["id"] for r in rows) == Counter(r["id"] for r in records)
    asked = calls.read_text(encoding="utf-8")
    assert all(f"Record {i} " not in asked for i in range(4))  # nothing done runs again
    assert all(f"Record {i} " in asked for i in range(4, 12))

    again = _ray(src, out, f"ray-logging:{calls}", "check")
    assert (again.skipped, again.processed) == (12, 0)
    assert calls.read_text(encoding="utf-8") == asked


def test_a_dead_backend_stops_the_run_and_an_unbuildable_one_is_raised(
    cluster: str, tmp_path: Path
) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(6))
    summary = _ray(src, out, "ray-dead", "check", actors=1, concurrency=1)
    assert summary.stopped and "bad key" in summary.stopped and summary.exit_code == 3
    rows = _out(out)
    assert rows and all(r["ok"] is False and r["retryable"] for r in rows)
    assert summary.processed < 6  # stopped early, as local batch stops

    with pytest.raises(BackendUnavailableError, match="model file is missing"):
        _ray(src, tmp_path / "other.jsonl", "ray-unbuildable", "check", actors=1)


def test_a_backend_failing_every_call_stops_the_run_as_locally(
    cluster: str, tmp_path: Path
) -> None:
    src, out, calls = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "calls.log"
    records = _records(12)
    _write_jsonl(src, records)
    summary = _ray(src, out, f"ray-failing:{calls}", "check", actors=1, concurrency=1,
                   batch_stop_after_failures=3)
    assert summary.exit_code == 3 and summary.stopped
    assert "3 records in a row failed on the backend" in summary.stopped
    rows = _out(out)
    assert [r["id"] for r in rows] == ["r0", "r1", "r2"]  # the rest are left for a re-run
    assert all(r["usage"] == {"calls": 0, "failed_calls": 4} for r in rows)
    # every call the backend got, those of a record already running at the stop too
    made = calls.read_text(encoding="utf-8").count("call")
    assert summary.failed_calls == made >= 12 and summary.calls == 0
    assert made <= 12 + 4 * 2  # and the stop started no record: at most two blocks were out

    again = _ray(src, out, "ray-scripted", "check")
    assert (again.processed, again.errors, again.exit_code) == (12, 0, 0)
    assert [r["id"] for r in _out(out)] == [r["id"] for r in records]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **_ENV, "CONLI_TEST_FAKE_CONCURRENCY": "3"}
    return subprocess.run(
        [sys.executable, "-m", "tests.support.batch_runner", "batch", *args, "--llm", "fake",
         "--no-progress"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


def test_cli_engine_ray_end_to_end_with_exit_codes(cluster: str, tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, [*_records(5), {"id": "x", "source": SOURCE, "response": ""}])
    done = _cli(str(src), str(out), "--engine", "ray", "--address", cluster, "--actors", "2",
                "--concurrency", "2", "--mode", "rewrite")
    assert done.returncode == 1, done.stderr  # one record failed: 1, as local batch
    assert "conli batch done: 6 records" in done.stderr and "errors 1" in done.stderr
    rows = {r["id"]: r for r in _out(out)}
    assert set(rows) == {"r0", "r1", "r2", "r3", "r4", "x"}
    assert rows["r0"]["result"]["mitigation"]["status"] == "rewritten"
    assert rows["x"]["error"]["type"] == "EmptyInputError"

    refused = [_cli(str(src), str(out), "--engine", "ray", "--actors", "0"),
               _cli(str(src), str(out), "--actors", "2"),
               _cli(str(tmp_path / "missing.jsonl"), str(out), "--engine", "ray")]
    assert [r.returncode for r in refused] == [2, 2, 2]
    assert "--actors must be at least 1" in refused[0].stderr
    assert "needs --engine ray" in refused[1].stderr
    assert "cannot read input file" in refused[2].stderr


def test_local_batch_never_imports_ray(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(src, _records(1))
    code = ("import sys, tests.support.scripted; from conli.cli.app import main; "
            f"code = main(['batch', {str(src)!r}, {str(out)!r}, '--llm', 'fake', "
            "'--no-progress']); print(code, 'ray' in sys.modules)")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=ROOT, env={**os.environ, **_ENV}, timeout=120)
    assert shown.stdout.split() == ["0", "False"], shown.stderr

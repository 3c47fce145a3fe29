"""A detector's own model server, in the service (issues 62.2 and 62.7).

A long-running service holds memory, files and connections flat: 300 ``/v1/check``
requests over 50 distinct per-request plans (thresholds), the service's only detector a
MiniCheck with a server of its own (a loopback fake); after the first 20 requests,
resident memory, open files and connections to the checker's server stay within 10%.
Each plan used to open its own connection to that server and keep it to the end. Counts,
not timings: the figures are the process's own, read from /proc.

``/readyz`` probes that server too, and says which server did not answer.
"""

from __future__ import annotations

import gc
import json
import math
import os
import socket
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from conli.config import Settings
from tests.support import scripted
from tests.support.http_fakes import Reply, Request, openai_chat, serve
from tests.support.service import AUTH, KEY, serving

SOURCE = "The Riverside library opened in 1962. The city council runs it."
RESPONSE = "The library opened in 1962."
PLANS = 50
REQUESTS = 300
FIRST = 20

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc")


def _minicheck(_request: Request) -> Reply:
    """Bespoke-MiniCheck as a server: Yes, P 0.97, with its log-probabilities."""
    top = [{"token": "Yes", "logprob": math.log(0.97), "bytes": None},
           {"token": "No", "logprob": math.log(0.03), "bytes": None}]
    body = openai_chat("Yes", completion=1)
    body["choices"][0]["logprobs"] = {"content": [
        {"token": "Yes", "logprob": top[0]["logprob"], "bytes": None, "top_logprobs": top}]}
    return Reply(200, body)


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _sockets() -> set[str]:
    """The inodes of this process's open sockets."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[len("socket:["):-1])
    return found


def _connections_to(port: int) -> int:
    """This process's established TCP connections whose far end is ``port`` (the client's)."""
    mine, count = _sockets(), 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port and inode in mine:
                count += 1
    return count


def _figures(port: int) -> tuple[int, int, int]:
    gc.collect()
    return _rss_kib(), len(os.listdir("/proc/self/fd")), _connections_to(port)


def test_many_per_request_plans_hold_memory_files_and_connections_flat(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(_minicheck) as checker:
        port = int(checker.url.rsplit(":", 1)[1])
        options = {"minicheck": {"llm": f"vllm:{checker.url}/v1#bespoke-minicheck"}}
        monkeypatch.setenv("CONLI_DETECTOR_OPTIONS", json.dumps(options))
        settings = Settings(service_api_keys=[KEY], detectors=["minicheck"],
                            service_timeout_seconds=60)
        with serving(settings, backend=scripted.backend(concurrency=4)) as url, \
                httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
            def check(number: int) -> None:
                threshold = round(0.3 + 0.01 * (number % PLANS), 2)  # one plan each
                answer = client.post("/v1/check", json={
                    "source": SOURCE, "response": RESPONSE,
                    "options": {"threshold": threshold}})
                assert answer.status_code == 200, answer.text
                assert answer.json()["threshold"] == threshold
                assert answer.json()["verdict"] == "supported"

            for number in range(FIRST):
                check(number)
            rss, files, connections = _figures(port)
            for number in range(FIRST, REQUESTS):
                check(number)
            rss_after, files_after, connections_after = _figures(port)
            asked = sum(r.path.endswith("/chat/completions") for r in checker.requests)
    assert asked == REQUESTS  # one sentence, one chunk: each request asked the checker
    assert connections >= 1
    assert connections_after <= max(connections * 1.1, connections + 1), \
        (connections, connections_after)
    assert files_after <= files * 1.1, (files, files_after)
    assert rss_after <= rss * 1.1, (rss, rss_after)


def test_readyz_probes_the_detectors_own_server_and_names_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port nothing listens on: the checker's server is down
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    monkeypatch.setenv("CONLI_DETECTOR_OPTIONS", json.dumps(
        {"minicheck": {"llm": f"vllm:{dead}#bespoke-minicheck"}}))
    settings = Settings(service_api_keys=[KEY], detectors=["minicheck"])
    with serving(settings) as url:  # --llm (the scripted backend) answers
        for _ in range(50):  # the first probe runs in the background
            answer = httpx.get(f"{url}/readyz", timeout=5)
            if "not been reached" not in answer.text:
                break
            time.sleep(0.1)
    assert answer.status_code == 503, answer.text
    detail = answer.json()["detail"]
    assert "detector minicheck's server" in detail and f"vllm at {dead}" in detail, detail

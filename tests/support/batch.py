"""``conli batch``'s files as the batch tests write and read them."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any


def _write_jsonl(path: Path, records: list[dict[str, Any]], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")


def _out(path: Path) -> list[dict[str, Any]]:
    """Every OUT line, parsed: a torn line would fail here."""
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), "OUT must end on a whole line"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


def _wait_for_lines(out: Path, at_least: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120  # a hang guard, not a speed test
    while not out.exists() or out.read_bytes().count(b"\n") < at_least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the batch made no progress"
        time.sleep(0.05)

"""The benchmarks' lock: each stored run's config, commit and results, pinned by hash.

One JSON file (``lock.json`` beside the configs' folder) maps each run's name to its config
file and that file's SHA-256, the commit the run was made at, and its results folder and
that folder's SHA-256 (``report.file_digest``: every file's name and bytes). A figure cited
by its run resolves through the lock to exactly the files it came from, and a result or
config changed without the lock is caught by recomputing it (``relock``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conli.errors import ConfigError
from conli.evaluation import runs
from conli.evaluation.report import file_digest
from conli.files import write_atomically

LOCK = "lock.json"
COMPRESS_OVER = 256 * 1024  # a predictions log above this is stored gzipped


def lock_beside(config: Path) -> Path | None:
    """The lock of the configs' folder ``config`` sits in, if there is one."""
    path = config.parent.parent / LOCK
    return path if path.is_file() else None


def read_lock(path: Path) -> dict[str, dict[str, Any]]:
    """The lock's entries by run name (none for a lock not written yet)."""
    if not path.exists():
        return {}
    try:
        entries: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["runs"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is not a benchmarks lock: {exc}") from exc
    return entries


def entry(config: Path, commit: str | None) -> dict[str, Any]:
    """A run's lock entry from its config and the results folder it names."""
    out = runs.out_of(config, runs.load(config))
    if not out.is_dir():
        raise ConfigError(f"{config}: its results folder {out} does not exist")
    return {"config": config.as_posix(), "config_sha256": runs.digest(config),
            "commit": commit, "results": out.as_posix(), "results_sha256": file_digest(out)}


def update(lock: Path, config: Path, commit: str | None) -> None:
    """Enter (or replace) one run in the lock."""
    entries = read_lock(lock)
    entries[config.stem] = entry(config, commit)
    _write(lock, entries)


def relock(lock: Path, configs: Path) -> dict[str, dict[str, Any]]:
    """Every config in ``configs`` entered anew, its hashes recomputed.

    Each commit is kept from the lock; a run not locked yet takes its recorded commit.
    """
    known = read_lock(lock)
    entries = {}
    for config in sorted(configs.glob("*.toml")):
        recorded = runs.load(config).recorded
        commit = known[config.stem]["commit"] if config.stem in known else (
            recorded.commit if recorded else None)
        entries[config.stem] = entry(config, commit)
    return entries


def write_relocked(lock: Path, configs: Path) -> None:
    """Rewrite the lock from the configs and results as they are now."""
    _write(lock, relock(lock, configs))


def _write(lock: Path, entries: dict[str, dict[str, Any]]) -> None:
    body = {"about": "each benchmark run: its config and results, pinned by SHA-256 "
                     "(conli.evaluation.lock)",
            "runs": dict(sorted(entries.items()))}
    write_atomically(lock, json.dumps(body, indent=1) + "\n")

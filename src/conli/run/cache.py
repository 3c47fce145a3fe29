"""A cache of check results on disk: a check already made costs no model call.

``conli check`` and ``conli batch`` keep one by default (``Settings.result_cache``); the
library's ``Checker`` when it is given one. The key is the SHA-256 of everything that
decides a result: the texts and the run's identity (``graph.identity``: resolved settings,
mode, prompt templates, detectors, model, conli's version), so a changed prompt or model is
another key, never a stale hit. Never fail open: an entry is written whole
(``files.atomic_writer``) with the digest of its result, and one that cannot be read, does
not match its key or digest, or does not validate is a miss; only a result whose every
part completed is kept (``completed``). Past ``max_bytes`` the least recently used entries
go (a hit touches its file).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from conli.config import Settings
from conli.files import atomic_writer, write_atomically
from conli.models import CheckResult, UsageTotals

log = logging.getLogger(__name__)
FORMAT = "conli-result-cache-1"  # an entry's shape: change it and every entry misses
KEEP = 0.9  # eviction frees down to this share of the bound, so it does not run every write
_BLOCK = 1 << 22
Digest = Callable[[Path], str]  # a file's SHA-256 (``ResultCache.file_digest``)


def canonical(value: object) -> bytes:
    """``value`` as one canonical JSON text (sorted keys, ASCII: a lone surrogate escaped)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"),
                      default=_plain).encode("ascii")


def _plain(value: object) -> object:
    """What ``json`` cannot write itself: a dataclass (the texts), a path, a set."""
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    raise TypeError(f"{type(value).__name__} has no place in a result cache key")


def _digest(value: object) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


class ResultCache:
    """Results by key in ``directory`` (``??/KEY.json``), at most about ``max_bytes`` of them."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._size: int | None = None  # bytes held, scanned on the first write
        self._lock = threading.Lock()

    @classmethod
    def of(cls, settings: Settings) -> ResultCache | None:
        """The cache ``settings`` name, or None where it is off (``result_cache``)."""
        if not settings.result_cache:
            return None
        return cls(settings.result_cache_dir or settings.cache_dir / "results",
                   settings.result_cache_mb * 1_000_000)

    def key(self, identity: Mapping[str, object], texts: object) -> str:
        """The key of a check of ``texts`` by a run of ``identity``."""
        return _digest({"format": FORMAT, "identity": identity, "texts": texts})

    def path_for(self, key: str) -> Path:
        """Where the entry of ``key`` lives (two-level fan-out)."""
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The result stored under ``key``; None if absent, torn, tampered or unreadable."""
        path = self.path_for(key)
        try:
            entry = json.loads(path.read_bytes())
            result = entry["result"]
            whole = (entry["format"] == FORMAT and entry["key"] == key
                     and entry["sha256"] == _digest(result) and isinstance(result, dict))
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            whole = False
        with self._lock:
            self.hits += whole
            self.misses += not whole
        if not whole:
            return None
        _touch(path)
        return dict(result)

    def put(self, key: str, result: Mapping[str, Any]) -> None:
        """Store ``result`` under ``key``, whole; a cache that cannot be written is skipped."""
        entry = {"format": FORMAT, "key": key, "sha256": _digest(result), "result": result}
        path = self.path_for(key)
        try:
            with atomic_writer(path, mode=0o600) as handle:  # the texts: for this user only
                json.dump(entry, handle, ensure_ascii=True)
            _touch(path)
            size = path.stat().st_size
        except OSError as exc:
            log.warning("the result cache %s cannot be written (%s); checks run as usual",
                        self.directory, exc)
            return
        with self._lock:
            self._size = self._scan()[0] if self._size is None else self._size + size
            if self._size > self.max_bytes:
                self._size = self._evict()

    def _scan(self) -> tuple[int, list[tuple[int, int, Path]]]:
        """Bytes held, and each entry as ``(mtime_ns, bytes, path)``."""
        entries = []
        for folder in _folders(self.directory):
            for item in _listing(folder):
                if item.name.endswith(".json") and item.is_file():
                    stat = item.stat()
                    entries.append((stat.st_mtime_ns, stat.st_size, Path(item.path)))
        return sum(size for _, size, _ in entries), entries

    def _evict(self) -> int:
        """Remove the least recently used entries down to ``KEEP`` of the bound; bytes left."""
        held, entries = self._scan()
        for _, size, path in sorted(entries):
            if held <= self.max_bytes * KEEP:
                break
            try:
                path.unlink()
            except OSError:
                continue
            held -= size
        return held

    def file_digest(self, path: Path) -> str:
        """SHA-256 of a file (a model of gigabytes: remembered by its path, size and time)."""
        stat = path.stat()
        seen = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
        memo = self.directory / "digests" / f"{seen.hexdigest()}.txt"
        try:
            known = memo.read_text(encoding="ascii").strip()
            if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
                return known
        except (OSError, ValueError):
            pass
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while block := handle.read(_BLOCK):
                digest.update(block)
        with contextlib.suppress(OSError):  # unremembered: hashed again next time
            write_atomically(memo, digest.hexdigest())
        return digest.hexdigest()


def _touch(path: Path) -> None:
    """Mark ``path`` used now, to the nanosecond (the least recently used goes first)."""
    now = time.time_ns()
    with contextlib.suppress(OSError):
        os.utime(path, ns=(now, now))


def _folders(directory: Path) -> list[os.DirEntry[str]]:
    """The fan-out folders (two hex digits) of the cache."""
    return [item for item in _listing(directory) if len(item.name) == 2 and item.is_dir()]


def _listing(directory: Path | os.DirEntry[str]) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as found:
            return list(found)
    except OSError:
        return []


def completed(result: CheckResult) -> bool:
    """Whether every part of ``result`` completed, so a stored copy may stand for it.

    A sentence, point, judge or rewrite that could not complete (the backend failed, an
    answer never validated, the deadline) may complete on another try: such a result is
    never kept, so a re-run runs it again (a hallucinated result with one unverified
    sentence too: the verdict hides it).
    """
    judged = [j for j in (result.judge_raw, result.judge_refined) if j is not None]
    points = result.coverage.points if result.coverage is not None else []
    return (not any(s.verdict == "unverified" for s in result.sentences if s.checked)
            and result.verdict != "unverified"
            and result.mitigation.status not in ("failed", "partial")
            and not any(j.status == "unverified" for j in judged)
            and not any(p.verdict == "unverified" for p in points))


def served(stored: Mapping[str, Any], seconds: float) -> CheckResult | None:
    """A stored result as this run gives it: 0 calls and ``cached`` (None: it does not validate).

    ``usage`` and ``timings`` are this run's (no model call, the lookup's seconds); every
    verdict, score and reason is the stored one's.
    """
    try:
        result = CheckResult.model_validate(stored)
    except ValueError:
        return None
    return result.model_copy(update={"usage": UsageTotals(cached=True), "usage_by_step": {},
                                     "timings": {"total": seconds}})



def cached_run(cache: ResultCache | None, identity: Callable[[Digest], Mapping[str, object]],
               texts: object, run: Callable[[], CheckResult]) -> CheckResult:
    """``run()``'s result, or the one ``cache`` holds for ``texts`` under ``identity``.

    A result ``run`` gives is stored when it ``completed``; a stored one is ``served``.
    """
    if cache is None:
        return run()
    started = time.perf_counter()
    key = cache.key(identity(cache.file_digest), texts)
    stored = cache.get(key)
    hit = served(stored, time.perf_counter() - started) if stored is not None else None
    if hit is not None:
        return hit
    result = run()
    if completed(result):
        cache.put(key, result.model_dump(mode="json"))
    return result

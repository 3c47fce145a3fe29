"""The output head: 8-bit blocks read from a GGUF, scored a vocabulary chunk at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conli.backends import lm_head
from conli.backends.lm_head import load_output_head

VOCAB, DIM = 1000, 64


def _gguf(path: Path, matrix: np.ndarray) -> Path:
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "qwen2")
    writer.add_tensor("output.weight", matrix.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _exact(matrix: np.ndarray, rows: np.ndarray, targets: np.ndarray) -> tuple[
        np.ndarray, np.ndarray]:
    logits = rows.astype(np.float64) @ matrix.T.astype(np.float64)
    log_norm = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    logp = logits[np.arange(len(rows)), targets] - log_norm
    probs = np.exp(logits - log_norm[:, None])
    return logp, -(probs * (logits - log_norm[:, None])).sum(1)


@pytest.mark.parametrize("chunk", [128, 8192], ids=["many chunks", "one chunk"])
def test_scores_match_an_exact_softmax_over_the_whole_vocabulary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(lm_head, "CHUNK", chunk)
    rng = np.random.default_rng(1)
    matrix = rng.normal(scale=0.5, size=(VOCAB, DIM))
    head = load_output_head(_gguf(tmp_path / "m.gguf", matrix), tmp_path / "heads")
    assert head.weights.dtype == np.int8 and head.weights.shape == (VOCAB, DIM)
    rows = rng.normal(size=(7, DIM))
    targets = rng.integers(0, VOCAB, size=7)
    logp, entropy = head.score(rows, targets)
    kept = (np.asarray(head.weights, dtype=np.float64).reshape(VOCAB, -1, lm_head.BLOCK)
            * np.asarray(head.scales, dtype=np.float64)[:, :, None]).reshape(VOCAB, DIM)
    want_logp, want_entropy = _exact(kept, rows, targets)  # the chunks add up exactly
    assert np.allclose(logp, want_logp, atol=1e-4)
    assert np.allclose(entropy, want_entropy, atol=1e-4)
    original_logp, _ = _exact(matrix, rows, targets)  # and 8 bits lose little
    assert np.abs(logp - original_logp).max() < 0.1
    assert head.score(rows[:0], targets[:0])[0].shape == (0,)


def test_the_conversion_is_kept_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    model = _gguf(tmp_path / "m.gguf", np.ones((VOCAB, DIM)))
    load_output_head(model, tmp_path / "heads")
    kept = sorted(p.name for p in (tmp_path / "heads").iterdir())
    assert len(kept) == 2 and not any(name.endswith(".tmp") for name in kept)

    def refuse(*_: object) -> None:
        raise AssertionError("converted twice")

    monkeypatch.setattr(lm_head, "_convert", refuse)
    assert load_output_head(model, tmp_path / "heads").weights.shape == (VOCAB, DIM)

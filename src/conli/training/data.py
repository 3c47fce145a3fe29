"""Stored readings (``eval/extract_signals.py``) as labelled sentence rows for training.

Each example's readings are on disk; its texts come from the dev sets (or the synthetic
errors planted in them, rebuilt from the same seed). A sentence's label is known when the
data labels sentences (synthetic errors, multi-row CoNLI suites), when the response is
faithful (every sentence is), or when a hallucinated response has one checked sentence;
otherwise it is ``None`` and only the response's label is known.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conli.evaluation.loaders import Example
from conli.segment import Segment
from conli.signals.features import SentenceSignals, sentence_signals
from conli.signals.lexical import SourceWords, entity_texts


@dataclass
class ExampleRows:
    """One example: its label, origin, and the signals and label of each checked sentence."""

    dataset: str
    example_id: str
    label: bool
    synthetic: bool
    sentences: list[SentenceSignals]
    labels: list[bool | None]
    meta: dict[str, Any] = field(default_factory=dict)


def load_rows(folder: Path, examples: Sequence[Example], nlp: Any) -> list[ExampleRows]:
    """Rows for every example of ``examples`` whose reading is stored in ``folder``."""
    import numpy as np

    by_key = {(e.dataset, e.id): e for e in examples}
    out = []
    for line in (folder / "index.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        example = by_key.get((record["dataset"], record["id"]))
        if example is None:
            continue
        segments = [Segment(i, text, start, end, checked)
                    for i, start, end, checked, text in record["segments"]]
        with np.load(folder / f"{record['key']}.npz") as arrays:
            signals = sentence_signals(dict(arrays), segments, SourceWords.of(example.source),
                                       entity_texts(nlp, segments))
        rows = [signals[s.index] for s in segments if s.index in signals]
        out.append(ExampleRows(
            dataset=example.dataset, example_id=example.id, label=example.label,
            synthetic="synthetic" in example.meta, sentences=rows,
            labels=sentence_labels(example, [s for s in segments if s.index in signals]),
            meta=example.meta,
        ))
    return out


def sentence_labels(example: Example, segments: Sequence[Segment]) -> list[bool | None]:
    """What is known of each segment's label (see the module docstring)."""
    if not example.label:
        return [False] * len(segments)
    if example.sentence_labels:
        return [_gold_at(example, s) for s in segments]
    if len(segments) == 1:
        return [True]
    return [None] * len(segments)


def _gold_at(example: Example, segment: Segment) -> bool | None:
    """The gold label of the gold sentence(s) ``segment`` overlaps in the response."""
    assert example.sentence_labels is not None
    found: list[bool] = []
    cursor = 0
    for text, hallucinated in example.sentence_labels:
        start = example.response.find(text.strip(), cursor)
        if start < 0:
            continue
        end = start + len(text.strip())
        cursor = end
        if segment.start < end and start < segment.end:
            found.append(hallucinated)
    if not found:
        return None
    return any(found)

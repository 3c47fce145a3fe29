"""The rows trained detectors learn from: features a detect run recorded, and gold labels.

A ``conli eval detect`` run of the fused detector records, for every checked sentence, the
values it weighed (``Judgement.features``) and chain of thought's own verdict. ``export``
joins them with the dev sets' labels into a small JSON Lines file kept in the repository
(features and labels only, no texts), so the shipped artifacts are rebuilt from a clone.

A sentence's label is known when the data labels sentences (the multi-row CoNLI suites),
when the response is faithful (every sentence is), or when a hallucinated response has
one checked sentence; otherwise it is ``None`` and only the response's label is known.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conli.models import SentenceResult
from conli.text.segment import Segment
from conli.training.example import Example

FORMAT = "conli-features-1"
FUSED = "fused"
NLI = ("sentence_nli", "entity_nli")
DIGITS = 6  # features are stored rounded: small files, and the same bytes on every machine


@dataclass(frozen=True)
class SentenceRow:
    """One checked sentence: what a detector weighed, its gold label and cot's verdict."""

    index: int
    values: dict[str, float]
    label: bool | None
    cot: str | None = None

    def vector(self, names: Sequence[str]) -> list[float]:
        """The values in the order ``names`` gives."""
        return [self.values[name] for name in names]


@dataclass
class ExampleRows:
    """One example: its label, where it is from, and its checked sentences."""

    dataset: str
    example_id: str
    label: bool
    sentences: list[SentenceRow]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def labels(self) -> list[bool | None]:
        """Each sentence's gold label (None: unknown)."""
        return [s.label for s in self.sentences]

    def cot_flagged(self) -> bool:
        """Chain of thought's response verdict: anything but supported is a flag."""
        return any(s.cot != "supported" for s in self.sentences)

    def cot_support(self) -> float:
        """Chain of thought's response score: its most doubtful sentence's NLI support."""
        return min(s.values["nli_support"] for s in self.sentences)


def rows_of(example: Example, sentences: Sequence[SentenceResult],
            detector: str = FUSED) -> ExampleRows | None:
    """The rows of one stored prediction; None if ``detector`` did not judge every sentence.

    A sentence the detector left unverified has no features: the example is skipped, as
    its prediction is scored wrong by the evaluation either way.
    """
    checked = [s for s in sentences if s.checked]
    segments = [Segment(s.index, s.text, s.start, s.end, True) for s in checked]
    labels = sentence_labels(example, segments)
    rows = []
    for sentence, label in zip(checked, labels, strict=True):
        mine = [j for j in sentence.judgements if j.detector == detector and j.features]
        if not mine:
            return None
        values = dict(mine[0].features)
        if "nli_contradiction" not in values:  # runs before it was recorded: its lead label
            values["nli_contradiction"] = float(
                bool(values.get("nli_flagged")) and mine[0].label == "contradiction")
        rows.append(SentenceRow(sentence.index, _rounded(values), label,
                                _cot_verdict(sentence, values)))
    if not rows:
        return None
    return ExampleRows(example.dataset, example.id, example.label, rows,
                       {"question": example.question is not None})


def _cot_verdict(sentence: SentenceResult, values: Mapping[str, float]) -> str:
    """What chain-of-thought NLI alone said of the sentence.

    From its own judgements where the result kept them; a detector that supersedes NLI
    (fused) keeps only its own, whose ``nli_flagged`` feature is NLI's verdict.
    """
    nli = [j.verdict for j in sentence.judgements if j.detector in NLI]
    if nli:
        return ("supported" if all(v == "supported" for v in nli)
                else "unverified" if "unverified" in nli else "hallucinated")
    return "hallucinated" if values.get("nli_flagged") else "supported"


def write_rows(path: Path, rows: Iterable[ExampleRows], meta: Mapping[str, Any]) -> None:
    """The features file: a meta line, then one example per line, keys sorted."""
    from conli.files import write_atomically

    lines = [json.dumps({"format": FORMAT, "meta": dict(meta)}, sort_keys=True)]
    for row in rows:
        lines.append(json.dumps({
            "dataset": row.dataset, "id": row.example_id, "label": row.label, "meta": row.meta,
            "sentences": [{"index": s.index, "label": s.label, "cot": s.cot,
                           "values": s.values} for s in row.sentences],
        }, sort_keys=True))
    write_atomically(path, "\n".join(lines) + "\n")


def read_rows(path: Path) -> tuple[dict[str, Any], list[ExampleRows]]:
    """The meta and rows of a features file written by ``write_rows``."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if not lines or lines[0].get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} features file")
    rows = [ExampleRows(r["dataset"], r["id"], bool(r["label"]), [
        SentenceRow(s["index"], {k: float(v) for k, v in s["values"].items()}, s["label"],
                    s.get("cot")) for s in r["sentences"]], r.get("meta", {}))
        for r in lines[1:]]
    return lines[0]["meta"], rows


def _rounded(values: Mapping[str, float]) -> dict[str, float]:
    return {k: round(float(v), DIGITS) for k, v in sorted(values.items())}


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

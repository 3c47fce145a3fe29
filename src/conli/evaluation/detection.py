"""Run the checker over examples and score its detections, per dataset and averaged.

Response level: a response is hallucinated if any sentence is (``CheckResult.verdict``).
Sentence level, where gold sentence labels exist: each gold sentence takes the verdicts of
the checked segments that overlap it (hallucinated if any is, else unverified if any is,
else supported; a gold sentence no checked segment covers counts as supported, and these
are counted as ``uncovered``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any, Protocol, TypeVar, overload

from conli.config import Settings
from conli.errors import InputError
from conli.evaluation.loaders import Example
from conli.evaluation.metrics import average_reports, detection_report
from conli.files import atomic_path, read_log
from conli.models import CheckResult, SentenceResult, Verdict
from conli.run.plan import adjusted

# Paper ablations (CoNLI table 4), chain-of-thought off, and the one-token score-first mode.
ABLATIONS: dict[str, dict[str, Any]] = {
    "hierarchical": {"entity_level": True, "chain_of_thought": True, "score_first": False},
    "hierarchical-score-first": {
        "entity_level": True,
        "chain_of_thought": True,
        "score_first": True,
    },
    "sentence": {"entity_level": False, "chain_of_thought": True, "score_first": False},
    "entity": {
        "entity_level": True,
        "sentence_level": False,
        "chain_of_thought": True,
        "score_first": False,
    },
    "hierarchical-no-cot": {"entity_level": True, "chain_of_thought": False, "score_first": False},
    "sentence-no-cot": {"entity_level": False, "chain_of_thought": False, "score_first": False},
}


class CheckerLike(Protocol):
    """What the runner needs from ``conli.Checker``."""

    def check(self, source: str, response: str, *, question: str | None = None) -> CheckResult:
        """Check one pair (``question``: what the response answers, if anything)."""
        ...


def ablation_settings(name: str, base: Settings | None = None) -> Settings:
    """Return ``base`` with the ablation's switches; refuse ones the pipeline cannot run."""
    if name not in ABLATIONS:
        raise ValueError(f"unknown ablation {name!r}; known: {', '.join(ABLATIONS)}")
    overrides = dict(ABLATIONS[name])
    missing = [key for key in overrides if key not in Settings.model_fields]
    if missing:
        raise ValueError(
            f"ablation {name!r} needs the setting(s) {', '.join(missing)}, which this "
            "version of conli does not have"
        )
    base = base or Settings(**{})
    return adjusted(base, **overrides)


def stratified_sample(
    examples: Sequence[Example], limit: int | None, seed: int, *, stratify: bool = True
) -> list[Example]:
    """``limit`` examples drawn with ``seed``; stratified keeps the label proportions.

    Allocation is proportional with largest remainders, each present label keeping at least
    one example when ``limit`` allows. The sample keeps the data's original order.
    """
    if limit is None or limit >= len(examples):
        return list(examples)
    rng = random.Random(seed)
    if not stratify:
        chosen = set(rng.sample(range(len(examples)), limit))
        return [e for i, e in enumerate(examples) if i in chosen]
    groups: dict[bool, list[int]] = {}
    for i, example in enumerate(examples):
        groups.setdefault(example.label, []).append(i)
    quotas = {label: limit * len(idx) / len(examples) for label, idx in groups.items()}
    counts = {label: int(q) for label, q in quotas.items()}
    for label in sorted(groups, key=lambda lb: (quotas[lb] - counts[lb], lb), reverse=True):
        if sum(counts.values()) >= limit:
            break
        counts[label] += 1
    for label in groups:  # keep every class present
        if counts[label] == 0 and limit >= len(groups):
            donor = max(counts, key=lambda lb: counts[lb])
            counts[donor] -= 1
            counts[label] = 1
    chosen = set()
    for label, idx in sorted(groups.items()):
        chosen.update(rng.sample(idx, counts[label]))
    return [e for i, e in enumerate(examples) if i in chosen]


@dataclass
class Outcome:
    """One example's prediction, with what is needed to score it."""

    example_id: str
    dataset: str
    gold: bool
    predicted: Verdict
    flagged_share: float | None = None
    support_score: float | None = None
    judge_score: float | None = None
    sentence_gold: list[bool] = field(default_factory=list)
    sentence_predicted: list[Verdict] = field(default_factory=list)
    uncovered_sentences: int = 0
    error: str | None = None
    result: CheckResult | None = None

    def to_json(self, *, with_result: bool = True) -> dict[str, Any]:
        """Return a JSON-ready record for ``predictions.jsonl``."""
        record = {k: v for k, v in self.__dict__.items() if k != "result"}
        if with_result and self.result is not None:
            record["result"] = self.result.model_dump(mode="json")
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Outcome:
        """Read back a ``predictions.jsonl`` record (how an interrupted run resumes)."""
        fields = {k: v for k, v in record.items() if k != "result"}
        result = record.get("result")
        return cls(**fields, result=CheckResult.model_validate(result) if result else None)


PREDICTIONS = "predictions.jsonl"  # a detect run's log: one ``Outcome`` a line, in run order
COMPRESSED = PREDICTIONS + ".gz"  # a stored run's log, gzipped to keep the repository small
T = TypeVar("T")


@overload
def read_predictions(run: Path) -> list[dict[str, Any]]: ...
@overload
def read_predictions(run: Path, parse: Callable[[dict[str, Any]], T]) -> list[T]: ...
def read_predictions(run: Path, parse: Callable[[dict[str, Any]], Any] | None = None
                     ) -> list[Any]:
    """Every record of a detect run's predictions in run order, each ``parse``d.

    The one reader of that log: the run's resume, the comparer and the benchmarks' scripts.
    ``run`` is the run's folder (one without a log has no record yet) or the log itself,
    ``predictions.jsonl`` or its gzipped copy (a stored run's; either name finds it).
    Records come raw (dicts) unless ``parse`` is given, e.g. ``Outcome.from_json``; a
    crash's torn last line is cut off (``files.read_log``).
    """
    path = predictions_file(run)
    if path.name.endswith(".gz"):
        return [(parse or _record)(record) for record in _gzipped_records(path)]
    return read_log(path, parse or _record)


def predictions_file(run: Path) -> Path:
    """The file holding a run's predictions: plain, else gzipped; refuses both or neither.

    A folder with neither has no prediction yet (its plain path is returned); a file named
    that exists in neither form is an error, as is a run holding both forms (one would
    silently shadow the other).
    """
    folder, name = (run, PREDICTIONS) if run.is_dir() else (run.parent, run.name)
    plain = folder / name.removesuffix(".gz")
    packed = plain.with_name(plain.name + ".gz")
    if plain.exists() and packed.exists():
        raise InputError(f"{folder} holds both {plain.name} and {packed.name}; keep one")
    if packed.exists():
        return packed
    if not plain.exists() and not run.is_dir():
        raise InputError(f"{run} is neither a detect run's folder nor its {PREDICTIONS}")
    return plain


def predictions_bytes(run: Path) -> bytes:
    """The run's predictions log as written, decompressed if stored gzipped."""
    path = predictions_file(run)
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def predictions_digest(run: Path) -> str:
    """SHA-256 of the run's predictions log as written (the same stored gzipped or not)."""
    return hashlib.sha256(predictions_bytes(run)).hexdigest()


def expand_predictions(run: Path) -> None:
    """Unzip a stored run's log in place before a run appends to it (resume)."""
    path = predictions_file(run)
    if path.name.endswith(".gz"):
        with atomic_path(run / PREDICTIONS) as tmp:
            tmp.write_bytes(predictions_bytes(run))
        path.unlink()


def compress_predictions(run: Path, over: int) -> bool:
    """Gzip a finished run's log when it is over ``over`` bytes; whether it did.

    ``mtime=0`` keeps the bytes the same for the same log, so a results hash is stable.
    """
    path = run / PREDICTIONS
    if not path.exists() or path.stat().st_size <= over:
        return False
    with atomic_path(run / COMPRESSED) as tmp:
        tmp.write_bytes(gzip.compress(path.read_bytes(), compresslevel=9, mtime=0))
    path.unlink()
    return True


def _gzipped_records(path: Path) -> list[Any]:
    records = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                records.append(json.loads(line)) if line.strip() else None
            except ValueError as exc:
                raise InputError(f"line {number} of {path} is not a result record") from exc
    return records


def _record(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("not a prediction record")
    return value


def flagged_share(sentences: Iterable[SentenceResult]) -> float | None:
    """Hallucinated / checked sentences: a continuous score for AUROC (None if none checked)."""
    checked = [s for s in sentences if s.checked]
    if not checked:
        return None
    return sum(1 for s in checked if s.verdict == "hallucinated") / len(checked)


def align_sentences(
    response: str, gold: Sequence[tuple[str, bool]], predicted: Sequence[SentenceResult]
) -> tuple[list[Verdict], int]:
    """Give each gold sentence the verdict of its overlapping checked segments; count uncovered."""
    verdicts: list[Verdict] = []
    uncovered = 0
    cursor = 0
    for text, _ in gold:
        start = response.find(text.strip(), cursor)
        if start < 0:
            raise ValueError(f"gold sentence not found in the response: {text[:60]!r}")
        end = start + len(text.strip())
        cursor = end
        overlapping = [
            s.verdict for s in predicted if s.checked and s.start < end and start < s.end
        ]
        if "hallucinated" in overlapping:
            verdicts.append("hallucinated")
        elif "unverified" in overlapping or None in overlapping:
            verdicts.append("unverified")
        else:
            uncovered += not overlapping
            verdicts.append("supported")
    return verdicts, uncovered


def predict(checker: CheckerLike, example: Example) -> Outcome:
    """Check one example; an input the checker refuses becomes ``unverified`` with its error."""
    try:
        result = checker.check(example.source, example.response, question=example.question)
    except InputError as exc:
        return Outcome(
            example.id,
            example.dataset,
            example.label,
            "unverified",
            error=str(exc),
            sentence_gold=[h for _, h in example.sentence_labels or ()],
            sentence_predicted=["unverified"] * len(example.sentence_labels or ()),
        )
    outcome = Outcome(
        example.id,
        example.dataset,
        example.label,
        result.verdict,
        flagged_share=flagged_share(result.sentences),
        support_score=result.support_score,
        judge_score=result.judge_raw.score if result.judge_raw is not None else None,
        result=result,
    )
    if example.sentence_labels:
        verdicts, uncovered = align_sentences(
            example.response, example.sentence_labels, result.sentences
        )
        outcome.sentence_gold = [h for _, h in example.sentence_labels]
        outcome.sentence_predicted = verdicts
        outcome.uncovered_sentences = uncovered
    return outcome


def run_order(sets: Iterable[Sequence[Example]], seed: int) -> list[Example]:
    """Each set in a seeded random order, interleaved round-robin across sets.

    A run cut short (``--budget-minutes``, Ctrl-C) is then a random subsample of every set.
    """
    shuffled = []
    for examples in sets:
        order = list(examples)
        random.Random(f"order-{seed}").shuffle(order)
        shuffled.append(order)
    return [e for row in zip_longest(*shuffled) for e in row if e is not None]


def run_detection(
    checker: CheckerLike,
    examples: Sequence[Example],
    *,
    on_outcome: Callable[[Outcome], None] | None = None,
    progress: bool = False,
    deadline: float | None = None,
) -> list[Outcome]:
    """Predict examples in order; ``on_outcome`` sees each as it completes.

    Stops early, keeping what is done, once ``deadline`` (``time.monotonic()``) has passed,
    so a long evaluation can be run in slices and resumed.
    """
    outcomes: list[Outcome] = []
    for number, example in enumerate(examples, start=1):
        if deadline is not None and time.monotonic() >= deadline:
            break
        outcome = predict(checker, example)
        outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
        if progress:
            print(f"\r{number}/{len(examples)} {example.id}", end="", file=sys.stderr, flush=True)
    if progress and examples:
        print(file=sys.stderr)
    return outcomes


def detectors_that_ran(outcomes: Iterable[Outcome]) -> list[str]:
    """Every detector that judged a sentence in these predictions, in first-seen order.

    Read from the results themselves, so a table names what decided it, whatever the
    settings asked for (``auto`` resolves per backend).
    """
    seen: dict[str, None] = {}
    for outcome in outcomes:
        for sentence in outcome.result.sentences if outcome.result else ():
            for judgement in sentence.judgements:
                seen.setdefault(judgement.detector)
    return list(seen)


def score_outcomes(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Per dataset: response-level (and sentence-level) reports; plus the average over sets."""
    by_dataset: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_dataset.setdefault(outcome.dataset, []).append(outcome)
    datasets: dict[str, Any] = {}
    for name, items in by_dataset.items():
        scores: dict[str, list[float | None]] = {
            "flagged_share": [o.flagged_share for o in items],
            "not_entailed": [
                None if o.support_score is None else 1.0 - o.support_score for o in items
            ],
            "judge_inverted": [
                None if o.judge_score is None else 6.0 - o.judge_score for o in items
            ],
        }
        scores = {name: values for name, values in scores.items() if any(
            v is not None for v in values)}
        entry: dict[str, Any] = {
            "response": detection_report(
                [o.gold for o in items], [o.predicted for o in items], scores
            ),
            "input_errors": sum(1 for o in items if o.error),
        }
        with_sentences = [o for o in items if o.sentence_gold]
        if with_sentences:
            entry["sentence"] = detection_report(
                [g for o in with_sentences for g in o.sentence_gold],
                [p for o in with_sentences for p in o.sentence_predicted],
            )
            entry["sentence"]["uncovered"] = sum(o.uncovered_sentences for o in with_sentences)
        datasets[name] = entry
    return {
        "datasets": datasets,
        "average": {"response": average_reports(d["response"] for d in datasets.values())},
    }

"""Judge evaluation (seed 003): residuals, and the score progression over 0-100% hallucination.

Each item is a faithful summary cut to 3-5 sentences (as many as it has, up to five, so the
progression has seed 003's 20% steps where the texts allow it). Residuals compare gold and
single-sentence hallucinated text; the progression swaps in one more hallucinated sentence
per step. Variants are rule-based: an *intrinsic* variant contradicts the source by
swapping a number, a date, a named entity (for another of the same type from the source)
or by negating an auxiliary; an *extrinsic* variant appends a clause the source lacks.

Modes: ``rubric`` asks the rubric judge (its score a distribution's mean where the backend
gives log-probabilities); ``grounded`` checks each text with the configured detectors (the
product's default unless ``--detector``; the verdicts of one item's sentences are shared
through the call cache), and its score comes from the shipped scale (``grounded_rows``).
Beside it, a monotone scale fitted on the *other* datasets' items (``lodo_grounded``) shows
what a fitted scale would do, leave-one-dataset-out as detection's figures are; the scale
fitted on every item is what ``--write-scale`` writes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from pathlib import Path
from time import monotonic, perf_counter
from typing import TYPE_CHECKING, Any

from conli.backends.base import Backend
from conli.config import Settings
from conli.detectors import resolve
from conli.evaluation.detection import read_predictions
from conli.evaluation.loaders import Example
from conli.judges.grounded import Scale, evidence, grounded_judge, writer_name
from conli.judges.rubric import judge
from conli.run.plan import make_plan, options
from conli.training.perturb import extrinsic_variant, intrinsic_variant

if TYPE_CHECKING:
    from conli.pipeline import Checker

EXPECTED = {"gold_full": 5, "gold_sentence": 5, "intrinsic_sentence": 1, "extrinsic_sentence": 1}
Entities = Callable[[str], list[tuple[str, str]]]  # text -> [(entity text, NER label)]
MODES = ("grounded", "rubric")

# --- items, tasks and scores -------------------------------------------------------------


@dataclass
class JudgeItem:
    """A gold response cut to ``k`` sentences, with one intrinsic and extrinsic variant each."""

    id: str
    source: str
    gold: list[str]
    intrinsic: list[str | None]
    extrinsic: list[str]
    rules: list[str | None] = field(default_factory=list)
    dataset: str = ""


def build_items(
    examples: Sequence[Example], split: Callable[[str], list[str]], entities: Entities | None,
    *, sentences: tuple[int, int], limit: int | None, seed: int,
) -> list[JudgeItem]:
    """Gold examples with at least ``sentences[0]`` sentences, cut to at most ``sentences[1]``.

    One item a document (the bootstrap resamples documents), at most ``limit``.
    """
    fewest, most = sentences
    rng = random.Random(seed)
    items: list[JudgeItem] = []
    seen: set[str] = set()
    for example in examples:
        if example.label or example.source in seen:
            continue
        gold = split(example.response)[:most]
        if len(gold) < fewest:
            continue
        pool = entities(example.source) if entities else []
        intrinsic, rules = [], []
        for sentence in gold:
            found = intrinsic_variant(sentence, rng, entities(sentence) if entities else [], pool)
            intrinsic.append(found[0] if found else None)
            rules.append(found[1] if found else None)
        extrinsic = [extrinsic_variant(s, rng, example.source) for s in gold]
        seen.add(example.source)
        items.append(JudgeItem(example.id, example.source, gold, intrinsic, extrinsic, rules,
                               example.dataset))
        if limit is not None and len(items) >= limit:
            break
    return items


@dataclass(frozen=True)
class Task:
    """One text to score and what the score should be (``pct`` for progression tasks)."""

    item: str
    task: str
    text: str
    expected: int | None
    pct: int | None = None

    @property
    def target(self) -> float:
        """What a faithful judge scores it: ``expected``, or 5 down to 1 along the steps."""
        if self.expected is not None:
            return float(self.expected)
        return 5.0 - 4.0 * (self.pct or 0) / 100


def plan_tasks(items: Sequence[JudgeItem], seed: int) -> list[Task]:
    """Residual tasks (one random sentence index per item) and the 0-100% progressions."""
    rng = random.Random(seed)
    tasks = []
    for item in items:
        k = len(item.gold)
        i = rng.randrange(k)
        tasks.append(Task(item.id, "gold_full", " ".join(item.gold), 5, 0))
        tasks.append(Task(item.id, "gold_sentence", item.gold[i], 5))
        intrinsic_i = item.intrinsic[i]
        if intrinsic_i is not None:
            tasks.append(Task(item.id, "intrinsic_sentence", intrinsic_i, 1))
        tasks.append(Task(item.id, "extrinsic_sentence", item.extrinsic[i], 1))
        order = rng.sample(range(k), k)  # nested: each step swaps one more sentence
        variants_by_kind: dict[str, Sequence[str | None]] = {
            "intrinsic": item.intrinsic, "extrinsic": item.extrinsic}
        for kind, variants in variants_by_kind.items():
            if any(v is None for v in variants):
                continue
            for swapped in range(1, k + 1):
                chosen = set(order[:swapped])
                text = " ".join(str(variants[j]) if j in chosen else item.gold[j] for j in range(k))
                tasks.append(Task(item.id, f"progression_{kind}", text, None,
                                  round(100 * swapped / k)))
    return tasks


@dataclass(frozen=True)
class Scored:
    """A task with the judge's score (None when unverified) under one mode.

    ``evidence``: grounded mode's 0-1 evidence, from which a scale gives the score.
    """

    task: Task
    mode: str
    score: float | None
    template: str
    dataset: str = ""
    error: str | None = None
    seconds: float | None = None  # the judge's own time: detection is not counted
    reasoning_status: str | None = None
    evidence: float | None = None
    dropped_errors: int = 0
    tied_errors: int = 0  # errors the judge named that hold: tied to a sentence (rubric)

    @property
    def doc(self) -> tuple[str, str]:
        """The document scored: ids are unique within a set, not across two user files."""
        return self.dataset, self.task.item

    def to_json(self) -> dict[str, Any]:
        """A record of ``scored.jsonl``, the journal a re-run resumes from."""
        return {**{k: v for k, v in self.__dict__.items() if k != "task"},
                "task": dict(self.task.__dict__)}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Scored:
        """Read back a ``to_json`` record."""
        return cls(**{**record, "task": Task(**record["task"])})


def rows_from_json(record: dict[str, Any]) -> list[Scored]:
    """One document's rows from its journal record (``{"rows": [Scored.to_json(), ...]}``)."""
    return [Scored.from_json(row) for row in record["rows"]]


def score_rubric(
    backend: Backend, items: Sequence[JudgeItem], tasks: Sequence[Task], settings: Settings,
    progress: Callable[[int, int], None] | None = None,
) -> list[Scored]:
    """Ask the rubric judge for every task's score."""
    by_id = {item.id: item for item in items}
    scored = []
    for number, task in enumerate(tasks, start=1):
        started = perf_counter()
        item = by_id[task.item]
        result, _ = judge(backend, item.source, task.text, settings)
        scored.append(Scored(task, "rubric", result.score, result.template, item.dataset,
                             result.error, perf_counter() - started, result.reasoning_status,
                             dropped_errors=result.dropped_errors,
                             tied_errors=len(result.errors)))
        if progress is not None:
            progress(number, len(tasks))
    return scored


def _grounded_checker(backend: Backend, settings: Settings) -> Checker:
    from conli.pipeline import Checker

    return Checker(make_plan(settings, options(mitigate=False, judge=False)), backend)


def _evidence_row(checker: Checker, item: JudgeItem, task: Task, settings: Settings, *,
                  reason: bool) -> Scored:
    """One task's grounded evidence (and reasoning, timed, for a reasoned end text)."""
    sentences = checker.check(item.source, task.text).sentences
    share, _ = evidence(sentences)
    seconds = status = None
    if reason and (task.task == "gold_full" or task.pct == 100):
        started = perf_counter()
        result, _ = grounded_judge(checker.backend, item.source, task.text, sentences, settings)
        seconds, status = perf_counter() - started, result.reasoning_status
    writer = writer_name(settings, checker.backend.capabilities)  # the scale is added later
    return Scored(task, "grounded", None, writer, item.dataset,
                  seconds=seconds, reasoning_status=status, evidence=share)


@dataclass
class JudgeRun:
    """What ``score_documents`` scored: the documents done, and each mode's rows."""

    items: list[JudgeItem] = field(default_factory=list)
    rubric: list[Scored] = field(default_factory=list)
    evidence: list[Scored] = field(default_factory=list)
    planned: int = 0
    detectors: list[str] = field(default_factory=list)  # what grounded mode ran, resolved


def score_documents(
    backend: Backend, plans: Sequence[tuple[list[JudgeItem], list[Task]]], settings: Settings,
    modes: Sequence[str], reasoning_items: int, *, deadline: float | None = None,
    progress: Callable[[int, int], None] | None = None, clock: Callable[[], float] = monotonic,
    done: Sequence[Scored] = (), on_document: Callable[[list[Scored]], None] | None = None,
) -> JudgeRun:
    """Every mode on one document at a time, the sets (``plans``) taken in turn.

    A run stopped at ``deadline`` (checked between documents) so covers every set about
    equally, with both modes on the same documents. A document with rows in ``done`` (the
    journal an earlier run of the same set-up left) is taken from it, no call made; each
    newly scored document's rows go to ``on_document`` (the journal) as it completes.
    Grounded rows carry evidence, scored later by ``grounded_rows``; the gold and 100%
    texts of the first ``reasoning_items`` items of each set also get the grounded judge's
    reasoning (timed; it never changes the score, so the rest skip it).
    """
    checker = _grounded_checker(backend, settings) if "grounded" in modes else None
    journal: dict[tuple[str, str], list[Scored]] = {}
    for row in done:
        journal.setdefault(row.doc, []).append(row)
    per_set = [[(item, [t for t in tasks if t.item == item.id], rank < reasoning_items)
                for rank, item in enumerate(items)] for items, tasks in plans]
    order = [doc for turn in zip_longest(*per_set) for doc in turn if doc is not None]
    run = JudgeRun(planned=len(order),
                   detectors=[] if checker is None else resolve(checker.settings))
    for number, (item, tasks, reasoned) in enumerate(order, start=1):
        rows = journal.get((item.dataset, item.id))
        if rows is None:
            if deadline is not None and clock() >= deadline:
                break
            rows = _score_document(backend, checker, item, tasks, settings, modes, reasoned)
            if on_document is not None:
                on_document(rows)
        run.evidence += [r for r in rows if r.mode == "grounded"]
        run.rubric += [r for r in rows if r.mode == "rubric"]
        run.items.append(item)
        if progress is not None:
            progress(number, len(order))
    return run


def _score_document(backend: Backend, checker: Checker | None, item: JudgeItem,
                    tasks: list[Task], settings: Settings, modes: Sequence[str],
                    reasoned: bool) -> list[Scored]:
    """One document's rows: grounded evidence (with ``checker``), then the rubric's scores."""
    rows = [] if checker is None else [
        _evidence_row(checker, item, task, settings, reason=reasoned) for task in tasks]
    if "rubric" in modes:
        rows += score_rubric(backend, [item], tasks, settings)
    return rows


def fit_scale(rows: Sequence[Scored], version: str = "grounded_scale.v1") -> Scale:
    """The isotonic (non-increasing) map from evidence to each task's target score."""
    from sklearn.isotonic import IsotonicRegression

    usable = [r for r in rows if r.evidence is not None]
    fitted = IsotonicRegression(increasing=False, y_min=1.0, y_max=5.0, out_of_bounds="clip")
    fitted.fit([r.evidence for r in usable], [r.task.target for r in usable])
    return Scale(version, tuple(round(float(v), 6) for v in fitted.X_thresholds_),
                 tuple(round(float(v), 6) for v in fitted.y_thresholds_))


def lodo_grounded(rows: Sequence[Scored], shipped: Scale) -> list[Scored]:
    """Every grounded row scored by a scale fitted on the other datasets' rows only.

    With one dataset there is nothing to fit on but the scored rows themselves: ``shipped``
    (fitted elsewhere) scores them instead, and the template says which scale it was.
    """
    out = []
    for dataset in sorted({r.dataset for r in rows}):
        others = [r for r in rows if r.dataset != dataset and r.evidence is not None]
        scale = fit_scale(others) if others else shipped
        out += [replace(r, score=scale(r.evidence), template=f"{r.template}+{scale.version}")
                for r in rows if r.dataset == dataset and r.evidence is not None]
    return out


FITTED_MODE = "grounded, scale fitted leave-one-dataset-out"


def grounded_rows(rows: Sequence[Scored], shipped: Scale) -> list[Scored]:
    """The grounded rows as users get them, and the fitted scale that would replace it.

    ``grounded`` is what ships: the shipped scale, when it was set by hand or fitted
    elsewhere. When it was fitted on judge documents (its training says so) it would score
    its own training rows, so ``grounded`` is then the leave-one-dataset-out fit, the
    honest figure for the recipe that made it. Otherwise the fit is a mode of its own: the
    candidate it would take to replace what ships. With one dataset nothing is held out to
    fit on, and there is no candidate.
    """
    if "fitted_on" in shipped.training:
        return lodo_grounded(rows, shipped)
    as_shipped = [replace(r, score=shipped(r.evidence),
                          template=f"{r.template}+{shipped.version}")
                  for r in rows if r.evidence is not None]
    if len({r.dataset for r in as_shipped}) < 2:
        return as_shipped
    return [*as_shipped, *(replace(r, mode=FITTED_MODE) for r in lodo_grounded(rows, shipped))]


# --- the judge's AUROC on labelled data ---------------------------------------------------


def stored_grounded_scores(predictions: Path, scale: Scale
                           ) -> list[tuple[str, str, bool, float]]:
    """(example id, dataset, gold hallucinated, grounded score) from a stored detect run.

    The grounded score is computed from the sentence verdicts a ``conli eval detect`` run
    recorded, so its AUROC costs no model call; examples without a result are left out.
    """
    from conli.models import CheckResult

    rows = []
    for record in read_predictions(predictions):
        if not record.get("result"):
            continue
        share, _ = evidence(CheckResult.model_validate(record["result"]).sentences)
        rows.append((record["example_id"], record["dataset"], bool(record["gold"]), scale(share)))
    return rows


def judge_auroc(
    stored: Sequence[tuple[str, str, bool, float]], examples: dict[str, Example],
    backend: Backend | None, settings: Settings, per_dataset: int,
    progress: Callable[[int, int], None] | None = None, skip: int = 0,
) -> dict[str, Any]:
    """AUROC of 6 - score for "any hallucination" on labelled examples.

    Grounded on every stored example, and both modes on ``per_dataset`` of each set after
    its first ``skip`` (those a trained detector saw: the stored run's order is the order
    the shipped classifier was trained in), the rubric judge needing the model (``backend``
    None skips it). ``sample`` keeps each sampled example's scores, so sets can be pooled
    and figures re-read.
    """
    seen: dict[str, int] = {}
    sample = []
    for row in stored:
        if row[0] not in examples:
            continue
        seen[row[1]] = seen.get(row[1], 0) + 1
        if skip < seen[row[1]] <= skip + per_dataset:
            sample.append(row)
    rubric: list[float | None] = []
    if backend is not None:
        for number, (example_id, _, _, _) in enumerate(sample, start=1):
            example = examples[example_id]
            result, _ = judge(backend, example.source, example.response, settings)
            rubric.append(result.score)
            if progress is not None:
                progress(number, len(sample))
    scores = [{"id": example_id, "gold": gold, "grounded": grounded,
               "rubric": rubric[i] if rubric else None}
              for i, (example_id, _, gold, grounded) in enumerate(sample)]
    return {"grounded_all": auroc_of([(g, s) for _, _, g, s in stored]),
            **sample_aurocs(scores), "sample": scores}


def sample_aurocs(scores: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Grounded and (where it ran) rubric AUROC over sampled examples' stored scores."""
    out = {"grounded_sample": auroc_of([(s["gold"], s["grounded"]) for s in scores])}
    if any(s["rubric"] is not None for s in scores):
        out["rubric_sample"] = auroc_of([(s["gold"], s["rubric"]) for s in scores])
        out["grounded_minus_rubric"] = paired_difference(scores)
    return out


def paired_difference(scores: Sequence[dict[str, Any]], seed: int = 0,
                      resamples: int = 2000) -> dict[str, Any]:
    """Grounded AUROC minus rubric AUROC on the same examples, with a 95% interval.

    Examples are resampled (both modes' scores together; percentile interval, draws of one
    class skipped); one the rubric left unverified is left out of both, so the two AUROCs
    always rank the same texts.
    """
    import numpy as np

    from conli.evaluation.metrics import auroc

    both = [s for s in scores if s["rubric"] is not None and s["grounded"] is not None]

    def gap(rows: Sequence[dict[str, Any]]) -> float | None:
        gold = [r["gold"] for r in rows]
        grounded = auroc(gold, [6 - r["grounded"] for r in rows])
        rubric = auroc(gold, [6 - r["rubric"] for r in rows])
        return None if grounded is None or rubric is None else grounded - rubric

    point = gap(both)
    if point is None or len(both) < 2:
        return {"difference": point, "interval": None, "n": len(both)}

    draws = np.random.default_rng(seed).integers(0, len(both), (resamples, len(both)))
    gaps = [gap([both[i] for i in draw]) for draw in draws]
    kept = [g for g in gaps if g is not None]  # a draw of one class has no AUROC
    low, high = np.percentile(kept, [2.5, 97.5])
    return {"difference": point, "interval": [float(low), float(high)], "n": len(both)}


def auroc_of(rows: Sequence[tuple[bool, float | None]]) -> dict[str, Any]:
    """AUROC of 6 - score for gold "hallucinated", unverified scores left out and counted."""
    from conli.evaluation.metrics import auroc

    kept = [(gold, score) for gold, score in rows if score is not None]
    return {"auroc": auroc([g for g, _ in kept], [6 - s for _, s in kept]), "n": len(kept),
            "unverified": len(rows) - len(kept)}

"""Coverage and hallucination against points: seed 001's synthetic errors (§4.2, Tables 1, 3).

Pairs are built from SummEval, where each source document has many system summaries:

- an error-free pair is a faithful summary of 3-5 sentences (the response) with its own
  sentences as the points, or those points paraphrased by the model (response unchanged);
- a coverage error adds one unused point: a sentence of another faithful summary of the
  same document, skipped when it is a near-copy of a response sentence (60% of its
  characters matched in order, ``difflib``; word overlap is what is measured, so it is
  not used to choose);
- a hallucination removes one used point: the response still states it.

Each base pair gives a clean, a coverage-error and a hallucination example, with and
without paraphrase: six examples per document.
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from conli.agents.nli import Hypothesis, run_nli
from conli.agents.structured import ask_structured
from conli.backends.base import Backend
from conli.config import Settings
from conli.evaluation.loaders import Example
from conli.evaluation.metrics import auroc
from conli.models import Judgement, WordScore
from conli.prompts import render
from conli.signals.lexical import recall, stems, word_scores, words

PARAPHRASE_TEMPLATE = Path(__file__).parent / "templates" / "paraphrase_point.v1.jinja"
NEAR_COPY = 0.6


class Paraphrase(BaseModel):
    """The model's paraphrase of one point."""

    paraphrase: str = Field(min_length=1, max_length=800)


@dataclass
class Base:
    """One document's faithful summary, its sentences, paraphrases and an unused point."""

    id: str
    response: str
    sentences: list[str]
    unused: str
    paraphrased: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Case:
    """One synthetic example: points, response and what is wrong with the pair."""

    id: str
    kind: str  # clean | coverage | hallucination
    paraphrased: bool
    points: tuple[str, ...]
    response: str
    removed: int | None = None  # the response sentence whose point was removed
    added: int | None = None  # the index in ``points`` of the unused point

    @property
    def hallucinated(self) -> bool:
        """The response states something the points do not."""
        return self.kind == "hallucination"

    @property
    def uncovered(self) -> bool:
        """A point is missing from the response."""
        return self.kind == "coverage"


def build_bases(examples: Sequence[Example], split: Callable[[str], list[str]], *,
                limit: int, seed: int) -> list[Base]:
    """One base per document: a faithful 3-5 sentence summary and an unused point."""
    by_source: dict[str, list[Example]] = {}
    for example in examples:
        if not example.label:
            by_source.setdefault(example.source, []).append(example)
    rng = random.Random(seed)
    documents = list(by_source.values())
    rng.shuffle(documents)
    bases = []
    for summaries in documents:
        chosen = next((e for e in summaries if 3 <= len(split(e.response)) <= 5), None)
        if chosen is None:
            continue
        sentences = split(chosen.response)
        candidates = [s for e in summaries if e is not chosen for s in split(e.response)
                      if len(stems(s)) >= 4 and not _near_copy(s, sentences)]
        if not candidates:
            continue
        bases.append(Base(chosen.id, chosen.response, sentences, rng.choice(candidates)))
        if len(bases) >= limit:
            break
    return bases


def _near_copy(candidate: str, sentences: Sequence[str]) -> bool:
    """True when most of ``candidate``'s characters appear, in order, in one sentence."""
    for sentence in sentences:
        matcher = difflib.SequenceMatcher(None, candidate.lower(), sentence.lower(),
                                          autojunk=False)
        matched = sum(block.size for block in matcher.get_matching_blocks())
        if matched / max(1, len(candidate)) >= NEAR_COPY:
            return True
    return False


def paraphrase(backend: Backend, bases: Sequence[Base], settings: Settings) -> None:
    """Fill each base's ``paraphrased`` points (the response is left as it is)."""
    for base in bases:
        base.paraphrased = []
        for sentence in base.sentences:
            asked = ask_structured(
                backend, render(str(PARAPHRASE_TEMPLATE), point=sentence).messages, Paraphrase,
                step="paraphrase", template="paraphrase_point.v1", max_tokens=200,
                max_reasks=settings.max_reasks)
            base.paraphrased.append(asked.value.paraphrase if asked.value else sentence)


def cases(bases: Sequence[Base], seed: int) -> list[Case]:
    """Clean, coverage-error and hallucination cases of every base, plain and paraphrased."""
    rng = random.Random(seed)
    out = []
    for base in bases:
        removed = rng.randrange(len(base.sentences))
        for para in (False, True):
            points = tuple(base.paraphrased if para else base.sentences)
            if not points:
                continue
            out += [
                Case(base.id, "clean", para, points, base.response),
                Case(base.id, "coverage", para, (*points, base.unused), base.response,
                     added=len(points)),
                Case(base.id, "hallucination", para,
                     tuple(p for i, p in enumerate(points) if i != removed), base.response,
                     removed=removed),
            ]
    return out


# --- scores ------------------------------------------------------------------------------


@dataclass
class Scored:
    """Example-level error scores (higher = more likely an error) of one case."""

    case: Case
    overlap_hallucination: float
    overlap_coverage: float
    nli_hallucination: float | None = None
    nli_coverage: float | None = None
    semantic_hallucination: float | None = None
    semantic_coverage: float | None = None
    unverified: int = 0


def overlap_scores(case: Case) -> tuple[float, float]:
    """1 - ROUGE-1 precision of the response against the points, 1 - min point recall."""
    return (1.0 - recall(case.response, " ".join(case.points)),
            1.0 - min(recall(p, case.response) for p in case.points))


def nli_scores(backend: Backend, case: Case, sentences: Sequence[str],
               settings: Settings) -> tuple[float | None, float | None, int]:
    """1 - the weakest P(entailment): response sentences by the points, points by the response.

    Each score is computed only for the cases its AUC compares (hallucination: clean and
    hallucination cases; coverage: clean and coverage-error cases). A judgement that could
    not complete counts as not entailed (0), never as entailed.
    """
    halluc: list[Judgement] = []
    covered: list[Judgement] = []
    if case.kind in ("clean", "hallucination"):
        halluc, _ = run_nli(backend, "\n".join(case.points),
                            [Hypothesis(i, s) for i, s in enumerate(sentences)],
                            kind="sentence", settings=settings, detector="coverage_eval")
    if case.kind in ("clean", "coverage"):
        covered, _ = run_nli(backend, case.response,
                             [Hypothesis(i, p) for i, p in enumerate(case.points)],
                             kind="sentence", settings=settings, detector="coverage_nli")
    unverified = sum(j.verdict == "unverified" for j in (*halluc, *covered))
    return _weakest(halluc), _weakest(covered), unverified


def semantic_scores(reader: Backend, case: Case, sentences: Sequence[str],
                    memo: dict[tuple[str, str], Any]) -> tuple[float, float]:
    """The weakest response sentence and the weakest point by hidden-state alignment.

    A sentence's (a point's) score is the mean semantic word score of its content words
    against the points (the response), BERTScore-like; the example's is the highest.
    """
    from conli.signals.align import semantic_word_scores

    scored = semantic_word_scores(reader, " ".join(case.points), case.response, memo)
    starts = _starts(case.response, sentences)
    halluc = max((_mean([w.score for w in scored if start <= w.start < start + len(text)])
                  for start, text in zip(starts, sentences, strict=True)), default=0.0)
    cover = max(_mean([w.score for w in semantic_word_scores(reader, case.response, point,
                                                             memo)])
                for point in case.points)
    return halluc, cover


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _weakest(judged: Sequence[Judgement]) -> float | None:
    """1 - the lowest P(entailment); a failed judgement counts as 0, never as entailed."""
    if not judged:
        return None
    return 1.0 - min(0.0 if j.verdict == "unverified" else
                     j.score if j.score is not None else float(j.verdict == "supported")
                     for j in judged)


# --- word level --------------------------------------------------------------------------


@dataclass
class WordRows:
    """Word-level labels and scores by method, for one error type."""

    labels: list[int] = field(default_factory=list)
    scores: dict[str, list[float]] = field(default_factory=dict)

    def add(self, labels: Sequence[int], **by_method: Sequence[WordScore]) -> None:
        """Append one text's words (every method scores the same words in order)."""
        self.labels += list(labels)
        for method, found in by_method.items():
            if len(found) != len(labels):
                raise ValueError(f"{method} scored {len(found)} words, {len(labels)} labelled")
            self.scores.setdefault(method, []).extend(w.score for w in found)


def hallucinated_words(case: Case, sentences: Sequence[str],
                       starts: Sequence[int]) -> tuple[list[WordScore], list[int]]:
    """Lexical scores of the response's words, and 1 for words of the removed sentence."""
    scored = word_scores(case.response, " ".join(case.points))
    if case.removed is None:
        return scored, [0] * len(scored)
    start = starts[case.removed]
    end = start + len(sentences[case.removed])
    return scored, [int(start <= w.start < end) for w in scored]


def uncovered_words(case: Case) -> list[tuple[str, list[WordScore], list[int]]]:
    """Per point: its lexical word scores, and 1 for every word of the unused point."""
    return [(point, word_scores(point, case.response),
             [int(i == case.added)] * len(words(point)))
            for i, point in enumerate(case.points)]


def auc(labels: Sequence[int], scores: Sequence[float]) -> float | None:
    """ROC AUC with label 1 = an error (``metrics.auroc``), None with one class only."""
    return auroc([bool(label) for label in labels], scores)


def example_table(scored: Sequence[Scored]) -> dict[str, dict[str, Any]]:
    """AUC per method and error type, unparaphrased and paraphrased (seed 001 Table 1).

    Hallucination detection compares clean with hallucination cases, coverage detection
    clean with coverage-error cases, as the seed's test sets pair error-free examples
    with their synthetic errors.
    """
    table: dict[str, dict[str, Any]] = {}
    for para in (False, True):
        rows = [s for s in scored if s.case.paraphrased == para]
        name = "paraphrased" if para else "unparaphrased"
        halluc = [s for s in rows if s.case.kind in ("clean", "hallucination")]
        cover = [s for s in rows if s.case.kind in ("clean", "coverage")]
        table[name] = {
            "n": len(rows),
            "hallucination": {
                "overlap": auc([s.case.hallucinated for s in halluc],
                               [s.overlap_hallucination for s in halluc]),
                "nli": _model_auc(halluc, "hallucination", "nli"),
                "semantic": _model_auc(halluc, "hallucination", "semantic"),
            },
            "coverage": {
                "overlap": auc([s.case.uncovered for s in cover],
                               [s.overlap_coverage for s in cover]),
                "nli": _model_auc(cover, "coverage", "nli"),
                "semantic": _model_auc(cover, "coverage", "semantic"),
            },
        }
    return table


def _model_auc(rows: Sequence[Scored], kind: str, method: str) -> float | None:
    values = [(getattr(s.case, "hallucinated" if kind == "hallucination" else "uncovered"),
               getattr(s, f"{method}_{kind}")) for s in rows]
    values = [(label, score) for label, score in values if score is not None]
    return auc([label for label, _ in values], [score for _, score in values]) \
        if values else None


def word_table(cases_: Sequence[Case], split: Callable[[str], list[str]],
               backend: Backend | None,
               memo: dict[tuple[str, str], Any] | None = None) -> dict[str, dict[str, Any]]:
    """Word-level AUC per method (seed 001 Table 3): response words and point words.

    Hallucinated words: every response word of the clean and hallucination cases, 1 for
    the words of the sentence whose point was removed. Uncovered words: every point word
    of the clean and coverage cases, 1 for the unused point's. ``backend`` adds the
    semantic method (hidden-state alignment), the variant the product offers; None leaves
    it out. ``memo`` shares hidden states with the example-level scores.
    """
    from conli.signals.align import semantic_word_scores

    memo = {} if memo is None else memo
    table: dict[str, dict[str, Any]] = {}
    for para in (False, True):
        halluc, cover = WordRows(), WordRows()
        for case in cases_:
            if case.paraphrased != para:
                continue
            if case.kind in ("clean", "hallucination"):
                sentences = split(case.response)
                starts = _starts(case.response, sentences)
                lexical, labels = hallucinated_words(case, sentences, starts)
                extra = {"semantic": semantic_word_scores(
                    backend, " ".join(case.points), case.response, memo)} if backend else {}
                halluc.add(labels, lexical=lexical, **extra)
            if case.kind in ("clean", "coverage"):
                for point, lexical, labels in uncovered_words(case):
                    more = {"semantic": semantic_word_scores(
                        backend, case.response, point, memo)} if backend else {}
                    cover.add(labels, lexical=lexical, **more)
        table["paraphrased" if para else "unparaphrased"] = {
            "hallucinated_words": {m: auc(halluc.labels, s) for m, s in halluc.scores.items()},
            "uncovered_words": {m: auc(cover.labels, s) for m, s in cover.scores.items()},
            "words": {"hallucination": len(halluc.labels), "coverage": len(cover.labels)},
        }
    return table


def _starts(text: str, sentences: Sequence[str]) -> list[int]:
    """Character offset of each sentence in ``text`` (found in order)."""
    starts, cursor = [], 0
    for sentence in sentences:
        at = text.find(sentence, cursor)
        starts.append(max(at, cursor))
        cursor = max(at, cursor) + len(sentence)
    return starts


def evaluate(backend: Backend | None, bases: Sequence[Base], split: Callable[[str], list[str]],
             settings: Settings, *, seed: int, reader: Backend | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Build the cases, score them by overlap (and the model, given ``backend``).

    ``reader``, a backend that serves hidden states (the embedded one, not behind the
    call cache), adds the semantic scores, example- and word-level.
    """
    from conli.agents.nli_prompts import resolve

    built = cases(bases, seed)
    if backend is not None:
        settings = resolve(settings, backend)
    if reader is not None and not reader.capabilities.hidden_states:
        reader = None
    memo: dict[tuple[str, str], Any] = {}
    scored = []
    for number, case in enumerate(built, start=1):
        row = Scored(case, *overlap_scores(case))
        sentences = split(case.response)
        if backend is not None:
            row.nli_hallucination, row.nli_coverage, row.unverified = nli_scores(
                backend, case, sentences, settings)
        if reader is not None:
            row.semantic_hallucination, row.semantic_coverage = semantic_scores(
                reader, case, sentences, memo)
        scored.append(row)
        if progress is not None:
            progress(number, len(built))
    return {
        "examples": len(built), "documents": len(bases),
        "kinds": {k: sum(c.kind == k for c in built) for k in ("clean", "coverage",
                                                                "hallucination")},
        "unverified_judgements": sum(s.unverified for s in scored),
        "example_level": example_table(scored),
        "word_level": word_table(built, split, reader, memo),
        "paraphrase_sample": [{"point": s, "paraphrase": p} for base in bases[:5]
                              for s, p in zip(base.sentences, base.paraphrased, strict=False)],
        "unused_sample": [{"response": b.response, "unused": b.unused} for b in bases[:5]],
        "scores": [{"id": s.case.id, "kind": s.case.kind, "paraphrased": s.case.paraphrased,
                    "overlap_hallucination": s.overlap_hallucination,
                    "overlap_coverage": s.overlap_coverage,
                    "nli_hallucination": s.nli_hallucination, "nli_coverage": s.nli_coverage,
                    "semantic_hallucination": s.semantic_hallucination,
                    "semantic_coverage": s.semantic_coverage}
                   for s in scored],
    }

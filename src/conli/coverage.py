"""Coverage (seed 001): the points a response must cover, and word-level scores.

A coverage error is the other failure of grounded generation: the response drops a point it
was given. The points are read with the input (``inputs.parse_points``).

Words follow seed 001 §3.1 as ``signals.lexical`` does (one tokenizer for any script,
``conli.words``): lower-cased, Porter-stemmed, stop words dropped. A response word scores 1
(hallucinated) when neither it nor its stem is in the source, else 0; a point word scores 1
(uncovered) when the response lacks it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from conli.inputs import point_list
from conli.models import (
    Coverage,
    CoverageVerdict,
    PerspectiveCoverage,
    PointCheck,
    PointResult,
    WordScore,
)
from conli.signals.lexical import content_words, stop_words
from conli.words import written_words

if TYPE_CHECKING:
    from conli.graph.deps import Deps

# --- words -------------------------------------------------------------------------------


def words(text: str) -> list[tuple[str, int, int, str]]:
    """Content words of ``text`` as (text, start, end, stem); stop words dropped."""
    stop = stop_words()
    found = []
    for match in written_words(text):
        lower = match.group().lower()
        if lower in stop:
            continue
        stems = content_words(lower)
        if stems:
            found.append((match.group(), match.start(), match.end(), stems[0]))
    return found


def stems(text: str) -> frozenset[str]:
    """The set of stemmed content words of ``text`` (ROUGE-1 with stop words dropped)."""
    return frozenset(content_words(text))


def word_scores(text: str, reference: str) -> list[WordScore]:
    """Each content word of ``text``: 0 when ``reference`` has it (or its stem), else 1."""
    known = stems(reference) | {w.group().lower() for w in written_words(reference)}
    return [WordScore(text=word, start=start, end=end, method="lexical",
                      score=0.0 if stem in known or word.lower() in known else 1.0)
            for word, start, end, stem in words(text)]


def recall(point: str, text: str) -> float:
    """ROUGE-1 recall of ``point`` in ``text``: the share of its content words ``text`` has.

    A point with no content word counts as covered (1.0): nothing in it can be missing.
    """
    wanted = stems(point)
    return len(wanted & stems(text)) / len(wanted) if wanted else 1.0


def best_sentence(point: str, sentences: Sequence[str]) -> tuple[int | None, float]:
    """The index of the sentence that shares most of ``point``'s words, and that recall."""
    scored = [(recall(point, s), i) for i, s in enumerate(sentences)]
    value, index = max(scored, default=(0.0, -1))
    return (index if value > 0 else None), value


# --- merge -------------------------------------------------------------------------------


def merge_points(points: Mapping[str, list[str]], checks: Iterable[PointCheck],
                 supersedes: Mapping[str, frozenset[str]]) -> list[PointResult]:
    """One result per point from every counted check; never ``covered`` by default.

    A point is uncovered if any counted check says so, unverified if one could not
    complete or none judged it, else covered. As for sentences, a check does not count
    where a detector that supersedes its own (``supersedes``: name -> names) judged too.
    """
    by_point: dict[tuple[str, int], list[PointCheck]] = {}
    for check in checks:
        by_point.setdefault((check.perspective, check.index), []).append(check)
    results = []
    for perspective, index, text in point_list(points):
        found = by_point.get((perspective, index), [])
        present = {c.detector for c in found}
        overruled = {name for d in present for name in supersedes.get(d, frozenset())}
        counted = [c for c in found if c.detector not in overruled]
        verdicts = {c.verdict for c in counted}
        verdict: CoverageVerdict = (
            "uncovered" if "uncovered" in verdicts
            else "unverified" if "unverified" in verdicts or not counted else "covered")
        scores = [c.score for c in counted if c.score is not None]
        deciding = next((c for c in counted if c.verdict == verdict), None)
        results.append(PointResult(
            perspective=perspective, index=index, point=text, verdict=verdict,
            score=min(scores) if scores else None,
            sentence=deciding.sentence if deciding else None, checks=counted,
            words=[],
        ))
    return results


def perspectives(results: Sequence[PointResult]) -> list[PerspectiveCoverage]:
    """Per perspective: the minimum point score, and uncovered > unverified > covered."""
    grouped: dict[str, list[PointResult]] = {}
    for result in results:
        grouped.setdefault(result.perspective, []).append(result)
    out = []
    for name, members in grouped.items():
        scores = [m.score for m in members if m.score is not None]
        out.append(PerspectiveCoverage(
            name=name, score=min(scores) if len(scores) == len(members) else None,
            verdict=worst(m.verdict for m in members)))
    return out


def worst(verdicts: Iterable[CoverageVerdict]) -> CoverageVerdict:
    """Uncovered if any, else unverified if any, else covered (covered needs every one)."""
    seen = set(verdicts)
    return "uncovered" if "uncovered" in seen else "unverified" if "unverified" in seen or \
        not seen else "covered"



def coverage_block(source: str, response: str, points: Mapping[str, list[str]] | None,
                   checks: Sequence[PointCheck],
                   supersedes: Mapping[str, frozenset[str]]) -> Coverage:
    """The result's coverage: per point and perspective with points, else a score only."""
    if not points:
        return Coverage(score=recall(source, response))
    results = [r.model_copy(update={"words": word_scores(r.point, response)})
               for r in merge_points(points, checks, supersedes)]
    views = perspectives(results)
    scores = [v.score for v in views]
    return Coverage(verdict=worst(r.verdict for r in results), points=results,
                    perspectives=views,
                    score=min(s for s in scores if s is not None) if None not in scores else None)


def response_word_scores(source: str, response: str, deps: Deps) -> list[WordScore]:
    """The response's content words scored against the source, as ``word_scores`` asks."""
    method = deps.settings.word_scores
    if method == "off":
        return []
    if method == "semantic":
        from conli.signals.align import semantic_word_scores

        return semantic_word_scores(deps.backend, source, response)
    return word_scores(response, source)

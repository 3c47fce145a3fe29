"""Coverage (seed 001): merge the detectors' point checks into the result's coverage block.

A coverage error is the other failure of grounded generation: the response drops a point it
was given. The points are read with the input (``run.inputs.parse_points``); the detectors check
each one (``detectors.coverage``); this module merges their checks (a superseded detector's
check does not count, ``detectors.base.overruled``, as for sentences) and scores each
point's words (``signals.lexical``): a point word scores 1 (uncovered) when the response
lacks it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from conli.config import Language
from conli.detectors.base import overruled
from conli.models import Coverage, CoverageVerdict, PerspectiveCoverage, PointCheck, PointResult
from conli.run.inputs import point_list
from conli.signals.lexical import recall, word_scores
from conli.signals.lexical import words as words  # tests/text/test_multilingual.py imports it here


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
        ignored = overruled({c.detector for c in found}, supersedes)
        counted = [c for c in found if c.detector not in ignored]
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
                   supersedes: Mapping[str, frozenset[str]],
                   language: Language = "en") -> Coverage:
    """The result's coverage: per point and perspective with points, else a score only.

    Words are read in ``language`` (its stop words dropped).
    """
    if not points:
        return Coverage(score=recall(source, response, language))
    results = [r.model_copy(update={"words": word_scores(r.point, response, language)})
               for r in merge_points(points, checks, supersedes)]
    views = perspectives(results)
    scores = [v.score for v in views]
    return Coverage(verdict=worst(r.verdict for r in results), points=results,
                    perspectives=views,
                    score=min(s for s in scores if s is not None) if None not in scores else None)

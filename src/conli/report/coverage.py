"""The audit report's coverage and word-level parts (seed 001): points, word marks, legend.

``conli.report.html`` calls these on a result as the JSON dict it holds; they return what the
templates (``report/templates/coverage.html``) show, as plain values: the templates escape
every piece of text. A word whose offsets do not fit its text is not marked; a point whose
verdict is not ``covered`` or ``uncovered`` is shown unverified, never covered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from conli.models import WORD_FLAG

Record = dict[str, Any]

SALIENCE_NOTE = ("Word scores are lexical (in the text or not) or semantic (alignment of the "
                 "embedded model's hidden states): seed 001's gradient salience (§3.2) needs "
                 "a differentiable model, which conli does not ship.")


@dataclass(frozen=True)
class Word:
    """One flagged word's mark: semantic scores shade it (``alpha``), the title gives the score.

    ``miss`` marks a point's word missing from the response, which has its own colour.
    """

    text: str
    method: str
    title: str
    miss: bool = False
    alpha: str | None = None
    kind: ClassVar[str] = "word"


Pieces = list[str | Word]  # a text as it is shown: plain runs and marked words


def _number(value: Any) -> float | None:
    """A score as a float clamped to 0-1, or None if it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return min(1.0, max(0.0, float(value)))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _verdict(value: Any) -> str:
    """A coverage verdict safe to show and to use as a class: never covered by default."""
    return value if value in ("covered", "uncovered") else "unverified"


def _ordinal(index: Any) -> str:
    """`` 2`` for index 1 (shown from 1), nothing if the index is not an integer."""
    return f" {index + 1}" if isinstance(index, int) and not isinstance(index, bool) else ""


def flagged_words(words: Any, length: int) -> list[Record]:
    """The word records scoring at least ``WORD_FLAG`` that fit a text of ``length``, in order.

    Overlapping words after the first are dropped, so the marks never nest.
    """
    found = []
    for word in words if isinstance(words, list) else []:
        if not isinstance(word, dict):
            continue
        score, start, end = _number(word.get("score")), word.get("start"), word.get("end")
        if (score is not None and score >= WORD_FLAG and isinstance(start, int)
                and isinstance(end, int) and 0 <= start < end <= length):
            found.append({**word, "score": score})
    found.sort(key=lambda w: (w["start"], w["end"]))
    kept: list[Record] = []
    for word in found:
        if not kept or word["start"] >= kept[-1]["end"]:
            kept.append(word)
    return kept


def word_mark(text: str, word: Record, missing_from: str) -> Word:
    """One flagged word's mark; ``missing_from`` names the text it is scored against."""
    score = float(word["score"])
    method = "semantic" if word.get("method") == "semantic" else "lexical"
    title = f"not in {missing_from}: {method} score {score:.2f}"
    if missing_from != "the source":
        return Word(text, method, title, miss=True)
    alpha = None
    if method == "semantic":  # 0.12 at the flag threshold up to 0.62 at 1
        alpha = f"{0.12 + 0.5 * (score - WORD_FLAG) / (1 - WORD_FLAG):.2f}"
    return Word(text, method, title, alpha=alpha)


def marked(text: str, start: int, end: int, words: list[Record],
           missing_from: str = "the source") -> Pieces:
    """``text[start:end]`` as pieces, each flagged word wholly inside it a ``Word``.

    ``words`` come sorted and without overlaps (``flagged_words``); empty runs are left out.
    """
    out: Pieces = []
    cursor = start
    for word in words:
        if cursor <= word["start"] and word["end"] <= end:
            out.append(text[cursor:word["start"]])
            out.append(word_mark(text[word["start"]:word["end"]], word, missing_from))
            cursor = word["end"]
    out.append(text[cursor:end])
    return [piece for piece in out if piece != ""]


def legend() -> Record:
    """What the legend needs to say: the flag threshold and where word scores come from."""
    return {"word_flag": WORD_FLAG, "note": SALIENCE_NOTE}


def _sentence_text(sentences: Any, index: int) -> str:
    for s in sentences if isinstance(sentences, list) else []:
        if isinstance(s, dict) and s.get("index") == index:
            return _text(s.get("text"))
    return ""


def _covered_by(point: Record, sentences: Any) -> Record | None:
    """The covering sentence, numbered from 1, its text on hover; closest if not covered."""
    index = point.get("sentence")
    if not isinstance(index, int) or isinstance(index, bool):
        return None
    where = "sentence" if _verdict(point.get("verdict")) == "covered" else "closest: sentence"
    return {"label": f"{where} {index + 1}", "title": _sentence_text(sentences, index)}


def _score(value: Any) -> str:
    number = _number(value)
    return "–" if number is None else f"{number:.2f}"


def _point_row(point: Record, sentences: Any) -> Record:
    """One table row: perspective, the point with its missing words marked, verdict, score."""
    text = _text(point.get("point"))
    words = flagged_words(point.get("words"), len(text))
    return {"name": f"{point.get('perspective', '')}{_ordinal(point.get('index'))}",
            "point": marked(text, 0, len(text), words, "the response"),
            "verdict": _verdict(point.get("verdict")), "score": _score(point.get("score")),
            "covered_by": _covered_by(point, sentences)}


def _perspectives(coverage: Record) -> list[str]:
    """Each perspective's minimum score and worst verdict, when there is more than one."""
    views = [v for v in coverage.get("perspectives") or [] if isinstance(v, dict)]
    if len(views) < 2:
        return []
    return [f"{v.get('name', '')} {_score(v.get('score'))} ({_verdict(v.get('verdict'))})"
            for v in views]


def coverage_section(result: Record) -> Record | None:
    """The points table and the response's coverage verdict; without points, the score."""
    coverage = result.get("coverage")
    if not isinstance(coverage, dict):
        return None
    points = [p for p in coverage.get("points") or [] if isinstance(p, dict)]
    return {"score": _score(coverage.get("score")), "verdict": _verdict(coverage.get("verdict")),
            "rows": [_point_row(p, result.get("sentences")) for p in points],
            "perspectives": _perspectives(coverage)}


def _addition(item: Record) -> Record:
    added = item.get("added") is True
    note = "" if added or not item.get("note") else str(item["note"])
    return {"added": added, "name": f"{item.get('perspective', '')}{_ordinal(item.get('index'))}",
            "point": str(item.get("point", "")), "sentence": str(item.get("sentence", "")),
            "note": note}


def additions_section(result: Record) -> list[Record]:
    """The sentences ``--fix-coverage`` wrote for uncovered points, and whether each was added."""
    mitigation = result.get("mitigation")
    items = mitigation.get("added") if isinstance(mitigation, dict) else None
    return [_addition(item) for item in items or [] if isinstance(item, dict)]

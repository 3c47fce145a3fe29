"""The audit report's coverage and word-level parts (seed 001): points, word marks, legend.

``conli.report`` calls these on a result as the JSON dict it holds. Every piece of input
text is escaped; a word whose offsets do not fit its text is not marked; a point whose
verdict is not ``covered`` or ``uncovered`` is shown unverified, never covered.
"""

from __future__ import annotations

from html import escape
from typing import Any

from conli.display import WORD_FLAG

Record = dict[str, Any]

CSS = """
mark.word{color:inherit;font-weight:600;border-radius:3px;padding:0 1px;cursor:help;
text-decoration:underline wavy #b71c1c;text-decoration-skip-ink:none}
mark.word.lexical{background:rgba(183,28,28,.28)}
mark.word.miss{background:rgba(106,27,154,.22);text-decoration-color:#6a1b9a}
.covered{background:#2e7d32}.uncovered{background:#c62828}
table.coverage td:nth-child(4),table.coverage td:nth-child(5){white-space:nowrap}
tr.point-uncovered td{background:#fff5f5}tr.point-unverified td{background:#fffbea}
.legend{font-size:.9rem;color:#444;border:1px solid #ddd;border-radius:6px;padding:.4rem .8rem}
.legend mark{margin-right:.3rem}.legend span.sample{margin-right:1rem}
"""

SALIENCE_NOTE = ("Word scores are lexical (in the text or not) or semantic (alignment of the "
                 "embedded model's hidden states): seed 001's gradient salience (§3.2) needs "
                 "a differentiable model, which conli does not ship.")


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


def word_mark(text: str, word: Record, missing_from: str) -> str:
    """One flagged word as a ``<mark>``: semantic scores shade it, the title gives the score.

    ``missing_from`` names the text it is scored against; a point's words (missing from the
    response) get their own colour.
    """
    score = float(word["score"])
    method = "semantic" if word.get("method") == "semantic" else "lexical"
    title = f"not in {missing_from}: {method} score {score:.2f}"
    if missing_from != "the source":
        return (f'<mark class="word {method} miss" title="{escape(title)}">'
                f"{escape(text)}</mark>")
    style = ""
    if method == "semantic":  # 0.12 at the flag threshold up to 0.62 at 1
        alpha = 0.12 + 0.5 * (score - WORD_FLAG) / (1 - WORD_FLAG)
        style = f' style="background:rgba(183,28,28,{alpha:.2f})"'
    return f'<mark class="word {method}"{style} title="{escape(title)}">{escape(text)}</mark>'


def marked(text: str, start: int, end: int, words: list[Record],
           missing_from: str = "the source") -> str:
    """Escaped ``text[start:end]``, each flagged word wholly inside it in a ``<mark>``.

    ``words`` come sorted and without overlaps (``flagged_words``).
    """
    out: list[str] = []
    cursor = start
    for word in words:
        if cursor <= word["start"] and word["end"] <= end:
            out.append(escape(text[cursor:word["start"]]))
            out.append(word_mark(text[word["start"]:word["end"]], word, missing_from))
            cursor = word["end"]
    out.append(escape(text[cursor:end]))
    return "".join(out)


def legend() -> str:
    """What the report's marks mean, and where word scores come from."""
    samples = [
        '<mark class="flag hallucinated sample">hallucinated sentence</mark>',
        '<mark class="flag unverified sample">unverified sentence</mark>',
        '<mark class="word lexical">word not in the source</mark>',
        '<mark class="word semantic" style="background:rgba(183,28,28,.12)">semantic 0.5</mark>'
        '<mark class="word semantic" style="background:rgba(183,28,28,.62)">1.0</mark>',
        '<mark class="word lexical miss">point word not in the response</mark>',
    ]
    shown = "".join(f'<span class="sample">{sample}</span>' for sample in samples)
    return (f'<div class="legend"><p><b>Legend</b> {shown}</p><p>Words are marked from a score '
            f"of {WORD_FLAG}; hover a mark for its score. {escape(SALIENCE_NOTE)}</p></div>")


def _sentence_text(sentences: Any, index: int) -> str:
    for s in sentences if isinstance(sentences, list) else []:
        if isinstance(s, dict) and s.get("index") == index:
            return _text(s.get("text"))
    return ""


def _covered_by(point: Record, sentences: Any) -> str:
    """The covering sentence, numbered from 1, its text on hover; closest if not covered."""
    index = point.get("sentence")
    if not isinstance(index, int) or isinstance(index, bool):
        return "–"
    where = "sentence" if _verdict(point.get("verdict")) == "covered" else "closest: sentence"
    title = escape(_sentence_text(sentences, index))
    return f'<span title="{title}">{where} {index + 1}</span>'


def _score(value: Any) -> str:
    number = _number(value)
    return "–" if number is None else f"{number:.2f}"


def _point_row(point: Record, sentences: Any) -> str:
    """One table row: perspective, the point with its missing words marked, verdict, score."""
    text = _text(point.get("point"))
    verdict = _verdict(point.get("verdict"))
    index = point.get("index")
    number = f" {index + 1}" if isinstance(index, int) and not isinstance(index, bool) else ""
    cells = [
        f"{escape(str(point.get('perspective', '')))}{number}",
        marked(text, 0, len(text), flagged_words(point.get("words"), len(text)),
               "the response"),
        f'<span class="badge {verdict}">{verdict}</span>',
        _score(point.get("score")),
        _covered_by(point, sentences),
    ]
    return f'<tr class="point-{verdict}">' + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _perspectives(coverage: Record) -> str:
    """Each perspective's minimum score and worst verdict, when there is more than one."""
    views = [v for v in coverage.get("perspectives") or [] if isinstance(v, dict)]
    if len(views) < 2:
        return ""
    shown = " · ".join(f"{escape(str(v.get('name', '')))} {_score(v.get('score'))} "
                       f"({_verdict(v.get('verdict'))})" for v in views)
    return f'<p class="muted">Minimum by perspective: {shown}</p>'


def coverage_section(result: Record) -> str:
    """The points table and the response's coverage verdict; without points, the score."""
    coverage = result.get("coverage")
    if not isinstance(coverage, dict):
        return ""
    points = [p for p in coverage.get("points") or [] if isinstance(p, dict)]
    score = _score(coverage.get("score"))
    if not points:
        return (f'<p class="coverage">Coverage score: <b>{score}</b> <span class="muted">'
                "(share of the source's content words the response uses)</span></p>")
    verdict = _verdict(coverage.get("verdict"))
    head = ("<tr><th>Perspective</th><th>Point</th><th>Verdict</th><th>Score</th>"
            "<th>Covered by</th></tr>")
    rows = "".join(_point_row(p, result.get("sentences")) for p in points)
    return (f'<h3>Coverage <span class="badge {verdict}">{verdict}</span> '
            f'<span class="muted">score {score}</span></h3>'
            f'<table class="coverage">{head}{rows}</table>{_perspectives(coverage)}')


def _addition(item: Record) -> str:
    added = item.get("added") is True
    badge = '<span class="badge supported">added</span>' if added else \
        '<span class="badge error">not added</span>'
    index = item.get("index")
    number = f" {index + 1}" if isinstance(index, int) and not isinstance(index, bool) else ""
    note = "" if added or not item.get("note") else \
        f' <span class="muted">{escape(str(item["note"]))}</span>'
    sentence = escape(str(item.get("sentence", "")))
    written = f"<ins>{sentence}</ins>" if added else f"“{sentence}”"
    return (f"<li>{badge} {escape(str(item.get('perspective', '')))}{number}: "
            f"“{escape(str(item.get('point', '')))}” → {written}{note}</li>")


def additions_section(result: Record) -> str:
    """The sentences ``--fix-coverage`` wrote for uncovered points, and whether each was added."""
    mitigation = result.get("mitigation")
    items = mitigation.get("added") if isinstance(mitigation, dict) else None
    rows = [item for item in items or [] if isinstance(item, dict)]
    if not rows:
        return ""
    return f"<h3>Coverage additions</h3><ul>{''.join(_addition(r) for r in rows)}</ul>"

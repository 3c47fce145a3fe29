"""The report's marks as labelled examples: what a mark means, sign-offs, several reviewers.

The report's page (``report/templates/review.js``) downloads one JSON line per marked
sentence and per approved or rejected record: ``id``, ``source``, ``response``, ``label``,
the ``verdict`` marked and the ``mark`` (``right``/``wrong``), with ``reviewer``,
``decision``, ``comment``, ``marked_at``, ``results_sha256`` and ``conli_version`` (the last
three since issue 65; older files lack them and still load). A reviewer's sign-off is a line
of its own (``"kind": "sign-off"``), which is no example. Two reviewers (four eyes) mark the
same ids: ``agreement`` says whether their labels agree, and a disagreement is named, never
settled by a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conli.models import FLAGGED

MARKS = ("right", "wrong")  # the report's buttons on a sentence's verdict
SIGN_OFF = "sign-off"  # ``kind`` of a reviewer's sign-off line


def meant(verdict: str, mark: str) -> bool:
    """The label a mark means: true (hallucinated) for a flag marked right or a pass wrong."""
    return (verdict in FLAGGED) == (mark == "right")


def check_mark(row: Mapping[str, Any], label: bool) -> None:
    """A marked row's label must be what its mark means; ``ValueError`` says what is wrong.

    ``label`` is true when the answer is hallucinated: a flagged verdict marked right, or a
    passed one marked wrong. A row without ``mark`` is no mark, and passes.
    """
    if "mark" not in row:
        return
    mark, verdict = row["mark"], row.get("verdict")
    if mark not in MARKS:
        raise ValueError(f"mark must be 'right' or 'wrong', got {mark!r}")
    if not isinstance(verdict, str) or verdict not in (*FLAGGED, "supported"):
        raise ValueError(f"a marked row needs the verdict it marks (hallucinated, unverified "
                         f"or supported), got {verdict!r}")
    if label != meant(verdict, mark):
        raise ValueError(f"label {str(label).lower()} contradicts the row's own verdict "
                         f"{verdict!r} marked {mark!r}, which means label "
                         f"{str(meant(verdict, mark)).lower()}")


def is_sign_off(row: Mapping[str, Any]) -> bool:
    """Whether ``row`` is a reviewer's sign-off line, not an example."""
    return row.get("kind") == SIGN_OFF


def reviewer_of(row: Mapping[str, Any]) -> str | None:
    """The named reviewer of a marked row (None: not a mark, or no name given)."""
    name = row.get("reviewer")
    return name.strip() if "mark" in row and isinstance(name, str) and name.strip() else None


def second_mark(first: Mapping[str, Any], row: Mapping[str, Any], seen: set[str]) -> str | None:
    """Why ``row`` cannot be another reviewer's mark of ``first``'s id; None if it can be.

    It can when both are marks of the same texts and ``row``'s reviewer is named and has not
    marked this id yet (``seen``: the reviewers who have).
    """
    reviewer = reviewer_of(row)
    if reviewer_of(first) is None or reviewer is None:
        return "each example needs its own id (marks of one id by several reviewers need " \
               "each reviewer's name)"
    if reviewer in seen:
        return f"{reviewer} marked it twice"
    if any(first.get(k) != row.get(k) for k in ("source", "response", "verdict")):
        return "the two rows mark different texts"
    return None


@dataclass(frozen=True)
class Disagreement:
    """Reviewers who labelled one example differently: named, and left out of any fit."""

    id: str
    labels: dict[str, bool]  # reviewer -> label (true: hallucinated)

    def describe(self) -> str:
        """``x3#1 (Ada: hallucinated, Bob: supported)``."""
        said = ", ".join(f"{who}: {'hallucinated' if label else 'supported'}"
                         for who, label in self.labels.items())
        return f"{self.id} ({said})"


def agreement(labels: Mapping[str, bool]) -> bool | None:
    """Whether the reviewers agree: None when fewer than two marked it."""
    return None if len(labels) < 2 else len(set(labels.values())) == 1

"""Reviewers' marks read back into the report: who marked what, their agreement, sign-offs.

``conli report RESULTS --marks ada.jsonl --marks bob.jsonl`` shows, beside each sentence
and record, every reviewer's mark (``review.js`` downloads them; ``training.marks`` says
what they mean), whether the reviewers agree, and each reviewer's sign-off ("reviewed N of M
by X on DATE") with the results file it was made on. A marks file is held to its own fields
as ``conli calibrate`` holds it: a line that is not a mark or a sign-off, or whose label
contradicts its mark, is refused naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conli.errors import InputError
from conli.training.marks import agreement, check_mark, is_sign_off

Record = dict[str, Any]


@dataclass(frozen=True)
class Mark:
    """One reviewer's mark of one sentence (``ID#N``) or one record's verdict (``ID``)."""

    reviewer: str
    mark: str  # right or wrong
    label: bool  # what it means: true, hallucinated
    decision: str
    comment: str
    marked_at: str
    results_sha256: str


@dataclass(frozen=True)
class SignOff:
    """A reviewer's sign-off: how many of the report's records they reviewed, and when."""

    reviewer: str
    signed_at: str
    reviewed: int
    records: int
    results_sha256: str
    conli_version: str
    file: str


@dataclass
class Reviews:
    """Every loaded mark by item and reviewer, the files read, and the sign-offs."""

    marks: dict[str, dict[str, Mark]] = field(default_factory=dict)
    sign_offs: list[SignOff] = field(default_factory=list)
    # each file: its name, reviewer, marks and the results files they were made on
    files: list[tuple[str, str, int, set[str]]] = field(default_factory=list)
    _by_record: dict[str, dict[int, dict[str, Mark]]] | None = field(default=None, repr=False)

    def of_record(self, name: str) -> Record:
        """A record's marks as the page shows them: its decisions, and each sentence's."""
        if self._by_record is None:  # one pass over the marks, not one a record
            self._by_record = {}
            for item, by in self.marks.items():
                owner, _, index = item.rpartition("#")  # a sentence's mark: ID#N
                if owner and index.isdigit():
                    self._by_record.setdefault(owner, {})[int(index)] = by
        return {"decisions": dict(self.marks.get(name, {})),
                "sentences": dict(self._by_record.get(name, {}))}

    def standing(self, name: str) -> Record:
        """A record's row in the index: its reviewers, and whether they disagree anywhere."""
        mine = self.of_record(name)
        items = [mine["decisions"], *mine["sentences"].values()]
        reviewers = sorted({who for by in items for who in by})
        split = any(agreement({w: m.label for w, m in by.items()}) is False for by in items)
        shared = any(agreement({w: m.label for w, m in by.items()}) for by in items)
        return {"reviewers": reviewers,
                "agreement": "disagree" if split else "agree" if shared else ""}

    def agreement_counts(self) -> tuple[int, int]:
        """Items marked by two or more reviewers: how many they agree on, how many not."""
        said = [agreement({w: m.label for w, m in by.items()}) for by in self.marks.values()]
        return said.count(True), said.count(False)


def load_reviews(paths: Sequence[Path]) -> Reviews:
    """Read each marks file (``review.js``'s download); ``InputError`` naming a bad line."""
    reviews = Reviews()
    for path in paths:
        _read(path, reviews)
    return reviews


def _read(path: Path, reviews: Reviews) -> None:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read marks file {str(path)!r}: {exc.strerror or exc}") from exc
    unnamed = f"(unnamed, {path.name})"
    count, seen_on, who = 0, set(), unnamed
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line.decode("utf-8"))
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            if is_sign_off(row):
                reviews.sign_offs.append(_sign_off(row, path))
                continue
            mark = _mark(row, unnamed)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"{where}: not a mark of the report ({exc})") from exc
        reviews.marks.setdefault(str(row["id"]), {})[mark.reviewer] = mark
        count, who = count + 1, mark.reviewer
        seen_on.add(mark.results_sha256)
    reviews.files.append((path.name, who, count, seen_on))


def _mark(row: Record, unnamed: str) -> Mark:
    """One marked row, held to its fields (its label is what its mark means)."""
    label = row.get("label")
    if not isinstance(label, bool) or not isinstance(row.get("id"), str | int) \
            or "mark" not in row:
        raise ValueError("a mark needs id, label (true or false) and mark")
    check_mark(row, label)
    name = row.get("reviewer")
    return Mark(reviewer=name.strip() if isinstance(name, str) and name.strip() else unnamed,
                mark=str(row["mark"]), label=label, decision=_text(row.get("decision")),
                comment=_text(row.get("comment")), marked_at=_text(row.get("marked_at")),
                results_sha256=_text(row.get("results_sha256")))


def _sign_off(row: Record, path: Path) -> SignOff:
    reviewed, records = row.get("reviewed"), row.get("records")
    if not (isinstance(reviewed, int) and isinstance(records, int) and 0 <= reviewed <= records):
        raise ValueError("a sign-off needs reviewed and records, 0 <= reviewed <= records")
    return SignOff(reviewer=_text(row.get("reviewer")) or "(unnamed)",
                   signed_at=_text(row.get("signed_at")), reviewed=reviewed, records=records,
                   results_sha256=_text(row.get("results_sha256")),
                   conli_version=_text(row.get("conli_version")), file=path.name)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def on_file(sha256: str, results: str) -> str:
    """Which results file a mark or sign-off was made on, as the summary says it."""
    if not sha256:
        return "results file not recorded"
    return "this results file" if sha256 == results else f"another results file ({sha256[:12]})"


def summary_rows(reviews: Reviews, results: str) -> list[tuple[str, str]]:
    """The report's summary rows of the loaded marks: files, sign-offs, four-eyes agreement."""
    rows = [("marks", f"{count} by {who} ({name}; made on "
             f"{', '.join(sorted(on_file(s, results) for s in seen)) or 'nothing'})")
            for name, who, count, seen in reviews.files]
    rows += [("sign-off", f"reviewed {s.reviewed} of {s.records} by {s.reviewer} on "
              f"{s.signed_at or 'an unrecorded date'} ({on_file(s.results_sha256, results)}"
              + (f", conli {s.conli_version}" if s.conli_version else "") + ")")
             for s in reviews.sign_offs]
    agree, split = reviews.agreement_counts()
    if agree or split:
        rows.append(("four eyes", f"{agree + split} items marked by two or more reviewers: "
                     f"{agree} agree, {split} disagree ({100 * agree / (agree + split):.0f}% "
                     "agreement)"))
    return rows

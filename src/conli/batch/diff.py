"""``conli diff OLD NEW``: what changed between two ``conli batch`` runs of one set.

Records are matched by id (as OUT keys them: ``records.record_key``). For each id in both,
the verdict (or ``error`` for a record that failed to run), whether it passed (decided again
under one threshold for both runs, as the gate decides: ``gate.record_outcome``), its
support score and its judge score after the rewrite. What a nightly job wants to know:
``new_failures`` (passed last time, or new, and does not pass now), ``fixed``, ``flips``
(the verdict changed) and ``moves`` (a score moved by at least the given step), and the ids
only one run has.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from conli.batch.records import Record, out_records, record_key, shown_id
from conli.errors import InputError
from conli.gate import record_outcome, why_not_passed

Gate = Literal["new-failures", "flips", "moves"]
GATES: tuple[Gate, ...] = ("new-failures", "flips", "moves")


@dataclass(frozen=True)
class Standing:
    """One record as one run left it."""

    verdict: str  # supported, hallucinated, unverified; judged (judge mode); error
    outcome: str  # passed, failed, unverified; error; "" in judge mode (no verdict)
    support: float | None
    judge: float | None
    why: str  # why it did not pass, or its error; "" when it passed

    @property
    def passed(self) -> bool:
        """Whether it cleared the bar in this run."""
        return self.outcome == "passed"

    @property
    def failing(self) -> bool:
        """Ran and did not pass, or failed to run."""
        return self.outcome in ("failed", "unverified", "error")


def standing(record: Record, threshold: float | None) -> Standing:
    """``record``'s standing under ``threshold`` (None: the verdict alone)."""
    result = record.get("result")
    if not record.get("ok") or not isinstance(result, dict):
        error = record.get("error") if isinstance(record.get("error"), dict) else {}
        return Standing("error", "error", None, None,
                        f"{(error or {}).get('type', 'Error')}: {(error or {}).get('message', '')}")
    seen = record_outcome(result, threshold)
    judged = result.get("judge") or result.get("judge_refined") or {}
    return Standing(verdict=str(result.get("verdict", "judged")), outcome=seen or "",
                    support=_number(result.get("support_score")),
                    judge=_number(judged.get("score") if isinstance(judged, dict) else None),
                    why=why_not_passed(result, threshold) if seen in ("failed", "unverified")
                    else "")


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


@dataclass(frozen=True)
class Change:
    """One id whose standing changed: before and after (None: absent from that run)."""

    id: str
    old: Standing | None
    new: Standing | None
    moved: dict[str, float] = field(default_factory=dict)  # score name -> new minus old


@dataclass
class Diff:
    """Every change between two runs, by kind; ``both`` ids in both."""

    both: int = 0
    new_failures: list[Change] = field(default_factory=list)
    fixed: list[Change] = field(default_factory=list)
    flips: list[Change] = field(default_factory=list)
    moves: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    gone: list[Change] = field(default_factory=list)

    def found(self, gate: Gate) -> bool:
        """Whether a change of kind ``gate`` (``--fail-on``) was found."""
        return bool({"new-failures": self.new_failures, "flips": self.flips,
                     "moves": self.moves}[gate])

    def counts(self) -> dict[str, int]:
        """How many of each kind."""
        return {"in_both": self.both, "new_failures": len(self.new_failures),
                "fixed": len(self.fixed), "flips": len(self.flips), "moves": len(self.moves),
                "added": len(self.added), "gone": len(self.gone)}

    def as_json(self) -> dict[str, Any]:
        """``conli diff --json``: the counts, then each change with both standings."""
        kinds = ("new_failures", "fixed", "flips", "moves", "added", "gone")
        return {"counts": self.counts(),
                **{kind: [asdict(change) for change in getattr(self, kind)] for kind in kinds}}


def _read(path: Path, threshold: float | None) -> tuple[dict[str, tuple[str, Standing]], int]:
    """Each id's shown name and standing in one OUT; how many later repeats were left out."""
    if not path.is_file():
        raise InputError(f"cannot read {str(path)!r}")
    found: dict[str, tuple[str, Standing]] = {}
    repeats = 0
    for record in out_records(path):
        if "id" not in record and "line" not in record:
            continue  # not a batch record
        key = record_key(record)
        if key in found:
            repeats += 1
            continue
        found[key] = (shown_id(record), standing(record, threshold))
    if not found:
        raise InputError(f"{str(path)!r} holds no conli batch record (one JSON object a line, "
                         "as conli batch writes OUT)")
    return found, repeats


def diff(old: Path, new: Path, *, threshold: float | None = None, min_move: float = 0.1,
         min_judge_move: float = 1.0) -> tuple[Diff, int]:
    """What changed from ``old`` to ``new``; also how many repeated ids were left out.

    A score moves when it changed by at least ``min_move`` (support, 0-1) or
    ``min_judge_move`` (judge, 1-5).
    """
    before, repeats = _read(old, threshold)
    after, more = _read(new, threshold)
    found = Diff()
    for key, (name, now) in after.items():
        was = before.get(key)
        if was is None:
            found.added.append(Change(name, None, now))
            if now.failing:
                found.new_failures.append(Change(name, None, now))
            continue
        found.both += 1
        _compare(found, Change(name, was[1], now), min_move, min_judge_move)
    found.gone = [Change(name, was, None) for key, (name, was) in before.items()
                  if key not in after]
    return found, repeats + more


def _compare(found: Diff, change: Change, min_move: float, min_judge_move: float) -> None:
    """File one id in both runs under each kind of change it shows."""
    was, now = change.old, change.new
    assert was is not None and now is not None
    if now.failing and not was.failing:
        found.new_failures.append(change)
    if was.failing and now.passed:
        found.fixed.append(change)
    if was.verdict != now.verdict:
        found.flips.append(change)
    moved = {name: round(b - a, 4) for name, a, b, step in (
        ("support", was.support, now.support, min_move),
        ("judge", was.judge, now.judge, min_judge_move))
        if a is not None and b is not None and abs(b - a) >= step - 1e-9}
    if moved:
        found.moves.append(Change(change.id, was, now, moved))


def lines(found: Diff, *, limit: int | None = None) -> Iterable[str]:
    """The diff as text: a count line, then each kind's ids with what changed."""
    counts = found.counts()
    yield ("conli diff: " + " · ".join(f"{name.replace('_', ' ')} {n}"
                                       for name, n in counts.items()))
    for title, kind in (("new failures", found.new_failures), ("fixed", found.fixed),
                        ("verdict flips", found.flips), ("score moves", found.moves),
                        ("only in NEW", found.added), ("only in OLD", found.gone)):
        if not kind:
            continue
        yield f"{title} ({len(kind)}):"
        for change in kind[:limit]:
            yield f"  {change.id}: {describe(change)}"
        if limit is not None and len(kind) > limit:
            yield f"  ... and {len(kind) - limit} more"


def describe(change: Change) -> str:
    """One change in words: verdict and outcome before and after, scores moved, why."""
    was, now = change.old, change.new
    if was is None or now is None:
        one = now or was
        assert one is not None
        outcome = f" ({one.outcome})" if one.outcome not in ("", one.verdict) else ""
        return f"{one.verdict}{outcome}" \
            + (f": {one.why}" if one.why else "")
    said = f"{was.verdict} -> {now.verdict}" if was.verdict != now.verdict else now.verdict
    if was.outcome != now.outcome:
        said += f" ({was.outcome or '-'} -> {now.outcome or '-'})"
    said += "".join(f", {name} {_move(change, name)}" for name in change.moved)
    return said + (f": {now.why}" if now.failing and now.why else "")


def _move(change: Change, name: str) -> str:
    was, now = change.old, change.new
    assert was is not None and now is not None
    a, b = (was.support, now.support) if name == "support" else (was.judge, now.judge)
    return f"{a:g} -> {b:g} ({change.moved[name]:+g})"

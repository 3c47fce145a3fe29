"""The one comparer: two sides paired example by example and put to the project's rule.

``conli eval compare A B`` (two stored runs) and ``conli eval decide CONFIG`` (a config's
comparisons) both come here. Each side is read (``sides``), the examples both hold are
paired per set, and ``rule.decide`` gives each set's paired gain and the mean of sets', with
their bootstrap intervals. Nothing is fitted and no model is called, so a decision stored as
a config reproduces from the stored runs alone.

The bootstrap's draws follow the examples' order, so the order is part of a comparison:
``sorted`` (by set, then by the example's key: the same whatever order the files hold) or
``run`` (as the candidate's first run lists them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from conli.errors import ConfigError, InputError
from conli.evaluation.rule import DRAWS, Decision, Metric, Paired, decide
from conli.evaluation.sides import READS, Items, Side, read_side


class Comparison(BaseModel):
    """A candidate against the current default, on the examples both sides hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="what is decided, as the table heads it")
    candidate: Side
    current: Side
    metric: Metric | None = Field(None, description="default: the candidate read's own")
    order: Literal["sorted", "run"] = "sorted"
    draws: int = Field(DRAWS, ge=100)

    def scored_by(self) -> Metric:
        """The metric: the one named, else the one the candidate's read is scored by."""
        return self.metric or READS[self.candidate.read].metric


@dataclass(frozen=True)
class Outcome:
    """A comparison decided: the rule's figures and what changed between the two sides."""

    comparison: Comparison
    decision: Decision
    changed: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        """The outcome as JSON (results files)."""
        return {"compare": self.comparison.model_dump(mode="json"),
                "decision": self.decision.as_dict(), "changed": self.changed}

    def markdown(self) -> str:
        """The rule's table under the comparison's name, then the changes."""
        candidate, current = labels(self.comparison)
        same = _comparable(self.comparison)
        moves = [f"- {what}: {n}" for what, n in self.changed.items()] or ["- none"]
        return "\n".join([f"## {self.comparison.name}", "",
                          self.decision.table(candidate, current), "",
                          *(["Examples whose value changed:", "", *moves, ""] if same else [])])


def _comparable(comparison: Comparison) -> bool:
    """Whether the two sides' values are worth telling apart example by example.

    Flags are, and one read of two runs; two different scores of one example always differ.
    """
    return (comparison.scored_by() == "bacc"
            or comparison.candidate.read == comparison.current.read)


def labels(comparison: Comparison) -> tuple[str, str]:
    """How the two sides are named in a table: their runs, their reads, or both."""
    a, b = comparison.candidate, comparison.current
    runs = (_run_name(a), _run_name(b))
    if a.run == b.run and a.artifact == b.artifact:
        return a.read, b.read
    if a.read == b.read:
        return runs
    return f"{runs[0]} ({a.read})", f"{runs[1]} ({b.read})"


def _run_name(side: Side) -> str:
    name = Path(side.artifact).stem if side.artifact else side.runs()[0].name
    return name.removesuffix(".jsonl")


def pair(candidate: Items, current: Items, order: Literal["sorted", "run"]
         ) -> dict[str, Paired]:
    """Each set's examples both sides hold, as the rule's paired values."""
    keys = [key for key in candidate if key in current]
    if order == "sorted":
        keys.sort()
    sets: dict[str, tuple[list[bool], list[float], list[float]]] = {}
    for key in keys:
        a, b = candidate[key], current[key]
        if a.gold != b.gold or a.dataset != b.dataset:
            raise InputError(f"{key}: the two sides disagree on its set or gold label; "
                             "they are not runs of the same examples")
        gold, mine, theirs = sets.setdefault(a.dataset, ([], [], []))
        gold.append(a.gold)
        mine.append(a.value)
        theirs.append(b.value)
    return {name: Paired(*values) for name, values in sets.items()}


def changes(paired: dict[str, Paired], metric: Metric) -> dict[str, int]:
    """What moved between the two sides.

    Flags: how many examples of each gold label the candidate now flags or passes; other
    values: how many differ.
    """
    counts: Counter[str] = Counter()
    for p in paired.values():
        for gold, a, b in zip(p.gold, p.candidate, p.current, strict=True):
            if a == b:
                continue
            if metric == "bacc":
                counts[f"{'hallucinated' if gold else 'faithful'}, now "
                       f"{'flagged' if a > 0.5 else 'passed'}"] += 1
            else:
                counts["differ"] += 1
    return dict(sorted(counts.items()))


def run_comparison(comparison: Comparison) -> Outcome:
    """Read both sides, pair them and decide; refuse when nothing pairs."""
    candidate, current = read_side(comparison.candidate), read_side(comparison.current)
    paired = pair(candidate, current, comparison.order)
    if not paired:
        raise ConfigError(f"{comparison.name}: no example is in both sides "
                          f"({len(candidate)} and {len(current)} examples)")
    metric = comparison.scored_by()
    decision = decide(paired, metric, draws=comparison.draws)
    if not decision.per_set:
        raise ConfigError(f"{comparison.name}: no set has both labels to score by {metric}")
    return Outcome(comparison, decision,
                   changes(paired, metric) if _comparable(comparison) else {})


def two_runs(candidate: Path, current: Path, read: str | None, metric: Metric | None,
             order: Literal["sorted", "run"] = "sorted") -> list[Comparison]:
    """``conli eval compare A B``: the comparisons two stored runs' kind calls for.

    Detect runs: their verdicts (BAcc) unless ``read`` names another read; rewrite runs:
    each of the three rewrite qualities (means).
    """
    if read is None and (candidate / "rewrites.jsonl").is_file():
        reads = [name for name in READS if name.startswith("rewrite-")]
    else:
        reads = [read or "verdict"]
    return [Comparison(name=f"{candidate.name} against {current.name}, {r}",
                       candidate=Side(run=str(candidate), read=r),
                       current=Side(run=str(current), read=r), metric=metric, order=order)
            for r in reads]


def report(outcomes: list[Outcome]) -> tuple[dict[str, Any], str]:
    """The outcomes as a results payload and as Markdown."""
    payload = {"kind": "decide", "decisions": [o.as_dict() for o in outcomes]}
    return payload, "\n".join(o.markdown() for o in outcomes)

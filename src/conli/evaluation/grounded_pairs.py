"""The grounded judge on two detectors' verdicts of the same examples, put to the rule.

The grounded judge makes no model call: its 1-5 score is the shipped scale of the evidence
its sentences' findings give (``judges.grounded``). So whether it ranks texts better on one
detector's verdicts than on another's is read from stored runs: each example is scored on
both, and ``decision`` puts AUROC of 6 - score ("any hallucination") to the project's rule
(``rule.decide``, paired per set). ``table`` writes a decision as the experiments show it;
``severity`` is a sentence's part in the score, for checks of a derivation against a run.
The scripts in ``benchmarks/experiments/issue-44-judge-on-cot/`` read these, never each
other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from conli.evaluation.paired import pct
from conli.evaluation.rule import Paired, decide
from conli.judges.grounded import finding
from conli.models import SentenceResult


class Judged(Protocol):
    """An example scored both ways: its set and its gold label (True = hallucinated)."""

    @property
    def dataset(self) -> str:
        """The set's name."""
        ...

    @property
    def gold(self) -> bool:
        """Whether the example holds a hallucination."""
        ...


T = TypeVar("T", bound=Judged)


def decision(examples: Sequence[T], candidate: Callable[[T], float],
             current: Callable[[T], float], draws: int) -> dict[str, Any]:
    """``candidate``'s grounded score against ``current``'s by the rule, AUROC of 6 - score."""
    sets: dict[str, list[T]] = {}
    for example in examples:
        sets.setdefault(example.dataset, []).append(example)
    paired = {name: Paired([e.gold for e in mine], [6 - candidate(e) for e in mine],
                           [6 - current(e) for e in mine]) for name, mine in sets.items()}
    return decide(paired, metric="auroc", draws=draws).as_dict()


def severity(sentence: SentenceResult) -> str:
    """A sentence's part in the grounded score: its finding's severity, or passed."""
    found = finding(sentence)
    return found.severity if found else ("passed" if sentence.checked else "not checked")


def gain(g: Mapping[str, float]) -> str:
    """A decision's gain (``Gain.as_dict``) in points with its 95% interval."""
    return f"{100 * g['gain']:+.1f} [{100 * g['low']:+.1f}, {100 * g['high']:+.1f}]"


def table(d: Mapping[str, Any], candidate: str, current: str,
          current_column: str | None = None) -> list[str]:
    """A ``decision`` as Markdown lines: each set, the mean of sets, and what the rule says.

    ``candidate`` and ``current`` name the detectors whose verdicts the judge read;
    ``current_column`` heads the current one's column (default "grounded on CURRENT").
    """
    lines = [f"| set | n (hallucinated) | {current_column or f'grounded on {current}'} "
             f"| grounded on {candidate} | {candidate} - {current} [95% interval] |",
             "|---|---|---|---|---|"]
    rows = d["per_set"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['n']} ({row['hallucinated']}) | {pct(row['current'])} "
                     f"| {pct(row['candidate'])} | {gain(row)} |")
    mean_current = sum(r["current"] for r in rows.values()) / len(rows)
    mean_candidate = sum(r["candidate"] for r in rows.values()) / len(rows)
    lines.append(f"| mean of sets | | {pct(mean_current)} | {pct(mean_candidate)} "
                 f"| **{gain(d['mean'])}** |")
    said = f"By the rule {candidate}'s verdicts {'**win**' if d['wins'] else 'do not win'}"
    if d["losses"]:
        said += f"; sets whose interval lies wholly below zero: {', '.join(d['losses'])}"
    if d["below_chance"]:
        said += f"; {current} is below chance on {', '.join(d['below_chance'])}"
    return [*lines, "", said + "."]

"""The project's rule for changing a default, as one function: paired gains with intervals.

A candidate replaces the current default when its paired gain on the *mean of the dev sets*
has a 95% bootstrap interval above zero and no set's own paired interval lies wholly below
zero. A current default that scores below chance on a set counts against it: the decision
names those sets. Both are scored on the same examples; every draw resamples each set's
examples with their labels kept apart (hallucinated and faithful), so each draw still has
both classes and the two are compared on the same texts.

The metric is AUROC (scores, higher = more likely hallucinated; the Mann-Whitney statistic
from scipy's ranks, ties averaged, as scikit-learn's ``roc_auc_score`` gives it, at a
fraction of its cost over thousands of draws), balanced accuracy (flags), or the plain mean
of a per-example quality (``mean``: a rewrite's re-detected cleanliness or its judge score,
where every example counts and the labels only keep the draws stratified).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

Metric = Literal["auroc", "bacc", "mean"]
DRAWS = 2000
SEED = 0


class InSet(Protocol):
    """Anything that names the dev set it belongs to."""

    @property
    def dataset(self) -> str:
        """The set's name."""
        ...


Item = TypeVar("Item", bound=InSet)


def held_out(items: Sequence[Item], skip: int) -> list[Item]:
    """``items`` without the first ``skip`` of each set, in order.

    A stored run's first examples of each set are the ones a shipped classifier was trained
    on (``conli eval judge-auroc --skip``): what is left is scored held out.
    """
    seen: dict[str, int] = {}
    kept = []
    for item in items:
        seen[item.dataset] = seen.get(item.dataset, 0) + 1
        if seen[item.dataset] > skip:
            kept.append(item)
    return kept


@dataclass(frozen=True)
class Paired:
    """One set's examples: gold labels (True = hallucinated) and the two methods' values.

    Values are scores that rank (AUROC: higher = more likely hallucinated) or flags (BAcc).
    """

    gold: Sequence[bool]
    candidate: Sequence[float]
    current: Sequence[float]


@dataclass(frozen=True)
class Gain:
    """A paired gain (candidate - current, in points) with its 95% interval."""

    point: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        """The gain as JSON."""
        return {"gain": self.point, "low": self.low, "high": self.high}


@dataclass
class Decision:
    """What the rule says: per-set and mean-of-sets gains, and whether the candidate wins."""

    metric: Metric
    per_set: dict[str, Gain]
    candidate: dict[str, float]
    current: dict[str, float]
    n: dict[str, int]
    positives: dict[str, int]
    mean: Gain
    wins: bool
    below_chance: list[str] = field(default_factory=list)  # sets where current < chance
    losses: list[str] = field(default_factory=list)  # sets whose interval is wholly below 0

    @property
    def holds(self) -> bool:
        """The rule for a change made for safety or speed: it costs no significant accuracy.

        The mean-of-sets interval contains zero or lies above it, its point estimate is no
        worse than -1 point, and no set's interval lies wholly below zero.
        """
        return self.mean.high >= 0 and self.mean.point >= -0.01 and not self.losses

    def as_dict(self) -> dict[str, Any]:
        """The decision as JSON (results files)."""
        return {"metric": self.metric, "wins": self.wins, "mean": self.mean.as_dict(),
                "per_set": {k: {**g.as_dict(), "candidate": self.candidate[k],
                                "current": self.current[k], "n": self.n[k],
                            "hallucinated": self.positives[k]}
                            for k, g in self.per_set.items()},
                "below_chance": self.below_chance, "losses": self.losses,
                "holds": self.holds,
                "rule": "mean-of-sets gain's 95% interval above 0, and no set's interval "
                        "wholly below 0"}

    def table(self, candidate: str, current: str) -> str:
        """The decision as a Markdown table, per set then the mean of sets."""
        head = (f"| set | n (hallucinated) | {candidate} | {current} | "
                f"{candidate} - {current} [95% interval] |\n|---|---|---|---|---|")
        rows = [f"| {name} | {self.n[name]} ({self.positives[name]}) | "
                f"{100 * self.candidate[name]:.1f} | "
                f"{100 * self.current[name]:.1f} | {_gain(g)} |"
                for name, g in self.per_set.items()]
        mean_c = sum(self.candidate.values()) / len(self.candidate)
        mean_d = sum(self.current.values()) / len(self.current)
        rows.append(f"| mean of sets | | {100 * mean_c:.1f} | {100 * mean_d:.1f} | "
                    f"**{_gain(self.mean)}** |")
        verdict = "wins" if self.wins else "does not win"
        notes = [f"By the rule the candidate ({candidate}) {verdict}."]
        if self.losses:
            notes.append(f"Sets it loses with the interval below zero: {', '.join(self.losses)}.")
        if self.below_chance:
            notes.append(f"The current default ({current}) is below chance on "
                         f"{', '.join(self.below_chance)}, which counts against it.")
        return "\n".join([head, *rows, "", " ".join(notes)])


def _gain(g: Gain) -> str:
    return f"{100 * g.point:+.1f} [{100 * g.low:+.1f}, {100 * g.high:+.1f}]"


def decide(sets: Mapping[str, Paired], metric: Metric = "auroc", *, draws: int = DRAWS,
           seed: int = SEED) -> Decision:
    """The rule on paired examples of each set; sets with one class are left out."""
    import numpy as np

    score = _metric(metric)
    usable = {name: p for name, p in sets.items()
              if len(set(p.gold)) == 2 or (metric == "mean" and p.gold)}
    arrays = {name: (np.asarray(p.gold, dtype=bool), np.asarray(p.candidate, dtype=float),
                     np.asarray(p.current, dtype=float)) for name, p in usable.items()}
    rng = np.random.default_rng(seed)
    by_label = {name: [ix for label in (False, True) if len(ix := np.flatnonzero(g == label))]
                for name, (g, _, _) in arrays.items()}
    picks = [{name: np.concatenate([rng.choice(ix, len(ix)) for ix in by_label[name]])
              for name in arrays} for _ in range(draws)]

    def gain_of(name: str, index: Any) -> float:
        g, c, d = arrays[name]
        return score(g[index], c[index]) - score(g[index], d[index])

    per_set: dict[str, Gain] = {}
    for name, (g, _, _) in arrays.items():
        whole = np.arange(len(g))
        per_set[name] = _interval(gain_of(name, whole), [gain_of(name, p[name]) for p in picks])
    mean_point = sum(g.point for g in per_set.values()) / len(per_set)
    mean_draws = [sum(gain_of(name, p[name]) for name in arrays) / len(arrays) for p in picks]
    mean = _interval(mean_point, mean_draws)
    candidate = {name: score(g, c) for name, (g, c, _) in arrays.items()}
    current = {name: score(g, d) for name, (g, _, d) in arrays.items()}
    losses = [name for name, g in per_set.items() if g.high < 0]
    chance = 0.5 if metric != "mean" else float("-inf")  # a mean has no chance level
    return Decision(metric, per_set, candidate, current,
                    {name: len(g) for name, (g, _, _) in arrays.items()},
                    {name: int(g.sum()) for name, (g, _, _) in arrays.items()}, mean,
                    wins=mean.low > 0 and not losses,
                    below_chance=[name for name, v in current.items() if v < chance],
                    losses=losses)


def _interval(point: float, draws: Sequence[float]) -> Gain:
    import numpy as np

    low, high = np.percentile(np.asarray(draws), [2.5, 97.5])
    return Gain(point, float(low), float(high))


def _metric(metric: Metric) -> Callable[[Any, Any], float]:
    """AUROC of scores, balanced accuracy of flags (values > 0.5 are flags), or a mean."""
    from scipy.stats import rankdata

    def auroc(gold: Any, values: Any) -> float:
        ranks = rankdata(values)
        positives = int(gold.sum())
        negatives = len(gold) - positives
        return float((ranks[gold].sum() - positives * (positives + 1) / 2)
                     / (positives * negatives))

    def bacc(gold: Any, values: Any) -> float:
        flagged = values > 0.5
        return float((flagged[gold].mean() + (~flagged[~gold]).mean()) / 2)

    def plain_mean(gold: Any, values: Any) -> float:
        return float(values.mean())

    return {"auroc": auroc, "bacc": bacc, "mean": plain_mean}[metric]

"""A stored run of a one-token detector, thresholded leave-one-dataset-out and decided.

The one-token detector (``yesno``) gives each checked sentence P(supported) from one
answer token; the shipped threshold is fitted on the dev sets, so every figure here fits
it on seven sets and scores the eighth (``lodo_flags``). A response is flagged when one
of its sentences falls at or below the threshold, or when the unstated-entity rule,
which runs after every detector, flags it (``response_score``). An example the run could
not check counts as wrong, never as a pass. No model call: everything is read from
``predictions.jsonl``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from conli.evaluation.detection import Outcome
from conli.evaluation.rule import Decision, Paired, decide
from conli.models import CheckResult
from conli.ner.grounding import decisive
from conli.signals.model import SignalModel
from conli.training.data import ExampleRows
from conli.training.train import best_threshold

RULE = "unstated_entities"


@dataclass(frozen=True)
class Scored:
    """One example of a run: its set, gold label and response score (None: not checked)."""

    example_id: str
    dataset: str
    gold: bool
    score: float | None


def sentence_support(result: CheckResult, detector: str) -> list[tuple[float | None, bool]]:
    """Each checked sentence's P(supported) from ``detector`` and whether the rule flags it.

    The rule is read from the sentence's recorded entities (``in_source`` as ``ground``
    found it), so it applies at any threshold, also where the run's own threshold had
    flagged the sentence already and the rule did not run.
    """
    out = []
    for sentence in result.sentences:
        if sentence.checked:
            found = [j.score for j in sentence.judgements if j.detector == detector]
            unstated = any(decisive(e) and e.in_source is False for e in sentence.entities)
            out.append((found[0] if found else None, unstated))
    return out


def response_score(result: CheckResult | None, detector: str) -> float | None:
    """1 - the lowest P(supported) of the response's sentences; 1.0 where the rule flags one.

    None where the run has no score for some checked sentence (the check did not complete).
    """
    if result is None:
        return None
    sentences = sentence_support(result, detector)
    if any(p is None for p, _ in sentences):
        return None
    return max((1.0 if rule else 1.0 - (p or 0.0) for p, rule in sentences), default=0.0)


def scored(outcomes: Iterable[Outcome], detector: str) -> list[Scored]:
    """Every outcome of a run as a ``Scored``."""
    return [Scored(o.example_id, o.dataset, o.gold,
                   None if o.error else response_score(o.result, detector)) for o in outcomes]


def lodo_flags(rows: Sequence[Scored]) -> tuple[dict[str, float], dict[str, float]]:
    """Each example's flag (1.0 flagged) at a threshold fitted on the other sets' examples.

    The threshold maximises balanced accuracy averaged over those sets (``best_threshold``).
    An unchecked example is flagged when faithful and passed when hallucinated: wrong.
    Also returns each set's threshold.
    """
    flags: dict[str, float] = {}
    thresholds: dict[str, float] = {}
    for held in sorted({r.dataset for r in rows}):
        train = [r for r in rows if r.dataset != held and r.score is not None]
        cut = best_threshold([r.score for r in train],  # type: ignore[misc]
                             [r.gold for r in train], [r.dataset for r in train])
        thresholds[held] = cut
        for r in rows:
            if r.dataset == held:
                flags[r.example_id] = float(not r.gold) if r.score is None \
                    else float(r.score >= cut)
    return flags, thresholds


def fitted_threshold(rows: Sequence[Scored]) -> float:
    """The threshold on every set at once: what ships (its figures come from ``lodo_flags``)."""
    train = [r for r in rows if r.score is not None]
    return best_threshold([r.score for r in train],  # type: ignore[misc]
                          [r.gold for r in train], [r.dataset for r in train])


def as_support_threshold(response_cut: float) -> float:
    """The response-score cut as a P(supported) threshold: pass above it."""
    return 1.0 - response_cut


def by_id(rows: Sequence[Scored]) -> Mapping[str, Scored]:
    """The rows by example id."""
    return {r.example_id: r for r in rows}


def paired_decision(rows: Sequence[Scored], candidate: Mapping[str, float],
                    current: Mapping[str, float]) -> Decision:
    """The rule's paired bootstrap (balanced accuracy) on the examples both decided."""
    both = [r for r in rows if r.example_id in candidate and r.example_id in current]
    sets = {d: Paired([r.gold for r in mine], [candidate[r.example_id] for r in mine],
                      [current[r.example_id] for r in mine])
            for d in sorted({r.dataset for r in both})
            for mine in [[r for r in both if r.dataset == d]]}
    return decide(sets, "bacc")


def rule_flags(outcomes: Iterable[Outcome]) -> dict[str, bool]:
    """Whether the unstated-entity rule flags some sentence of each checked example.

    Read from a run of the current product (its ``ground`` step tagged every checked
    sentence), so it is the rule as it runs today after any detector.
    """
    return {o.example_id: any(rule for _, rule in sentence_support(o.result, ""))
            for o in outcomes if o.result is not None}


def with_support_feature(rows: Sequence[ExampleRows], outcomes: Iterable[Outcome],
                         detector: str, name: str = "yes_p") -> list[ExampleRows]:
    """Feature rows with each sentence's P(supported) from ``detector`` added as ``name``.

    Only examples whose every checked sentence has a score in the run, with the same
    sentence indices, are kept: the same cut of the same text.
    """
    support = {}
    for o in outcomes:
        if o.result is not None and not o.error:
            support[o.example_id] = {
                s.index: next((j.score for j in s.judgements if j.detector == detector), None)
                for s in o.result.sentences if s.checked}
    out = []
    for row in rows:
        found = support.get(row.example_id)
        if found is None or any(found.get(s.index) is None for s in row.sentences):
            continue
        out.append(replace(row, sentences=[
            replace(s, values={**s.values, name: float(found[s.index] or 0.0)})
            for s in row.sentences]))
    return out


def decide_one_token(outcomes: Sequence[Outcome], rows: Sequence[ExampleRows],
                     current_model: SignalModel, detector: str = "yesno") -> dict[str, Any]:
    """The one-token detector against what ships, each way the issue asks, held out.

    ``outcomes``: a run of ``detector`` on examples ``current_model`` never saw; ``rows``:
    the stored features of those examples (what ships decides on them). The current
    default is ``current_model`` with the unstated-entity rule (as the product runs it).
    Candidates: the one-token detector alone at a threshold fitted on the other sets (the
    speed rule), ``fused``'s features plus its P(supported) refitted leave-one-dataset-out
    (the accuracy rule), and the reading plus P(supported) without NLI, refitted alike.
    """
    from conli.training.train import FUSED_FEATURES, FUSED_KEEP, leave_one_dataset_out
    from conli.training.train import response_score as model_score

    scored_rows = scored(outcomes, detector)
    rule = rule_flags(outcomes)
    ids = {r.example_id for r in scored_rows}
    current = {r.example_id: float(model_score(current_model, r) >= current_model.threshold
                                   or rule.get(r.example_id, False))
               for r in rows if r.example_id in ids}
    alone, cuts = lodo_flags(scored_rows)
    featured = with_support_feature(rows, outcomes, detector)
    by_set = {d: [r for r in featured if r.dataset == d] for d in {r.dataset for r in featured}}

    def refit(features: Sequence[str], keep: Sequence[str]) -> dict[str, float]:
        held = leave_one_dataset_out(featured, features=features, version="refit", keep=keep)
        return {r.example_id: float(p or rule.get(r.example_id, False))
                for h in held for r, p in zip(by_set[h.dataset], h.predicted, strict=True)}

    candidates = {
        f"{detector}, threshold fitted on the other sets (speed rule)": alone,
        f"fused refit with {detector}'s P(supported) as a feature (accuracy rule)":
            refit((*FUSED_FEATURES, "yes_p"), FUSED_KEEP),
        f"pmi_low + {detector}'s P(supported), no NLI, refit (speed rule)":
            refit(("pmi_low", "yes_p"), ()),
    }
    decisions = {name: paired_decision(scored_rows, flags, current)
                 for name, flags in candidates.items()}
    return {"n": len(scored_rows), "unscored": sum(r.score is None for r in scored_rows),
            "lodo_support_thresholds": {d: round(as_support_threshold(c), 4)
                                        for d, c in cuts.items()},
            "shipped_support_threshold": round(as_support_threshold(
                fitted_threshold(scored_rows)), 4),
            "decisions": decisions}


def markdown(report: Mapping[str, Any], current: str) -> str:
    """Each candidate's table by the rule, and the thresholds it used."""
    parts = [f"n = {report['n']} ({report['unscored']} not checked, counted wrong); "
             f"P(supported) cut fitted leave-one-dataset-out: "
             + ", ".join(f"{d} {c}" for d, c in report["lodo_support_thresholds"].items())
             + f"; fitted on every set (what ships): {report['shipped_support_threshold']}\n"]
    for name, decision in report["decisions"].items():
        parts.append(f"### {name}\n\n{decision.table(name, current)}")
    return "\n".join(parts)


def fit_with_support(outcomes: Sequence[Outcome], rows: Sequence[ExampleRows],
                     features: Sequence[str], version: str,
                     detector: str = "yesno") -> SignalModel:
    """The classifier that ships over ``features`` (one of them ``yes_p``), fitted on all rows.

    What ``decide_one_token``'s refit scores leave-one-dataset-out, fitted once on every
    set: its figures are those held-out ones, never its fit's own.
    """
    from conli.training.train import fit

    featured = with_support_feature(rows, outcomes, detector)
    model = fit(featured, features, version)
    return replace(model, training={
        "fitted_on": f"{len(featured)} dev examples with a stored reading and a run of "
                     f"{detector} (benchmarks/runs/yesno-heldout.toml)",
        "features": list(features),
        "method": "conli.training.train.fit (logistic regression, balanced, C=0.1) and the "
                  "response threshold best on the mean of the sets' balanced accuracy",
    })

"""Issue 45: what a support score is worth on a backend that gives no log-probabilities.

    python benchmarks/score_fallback.py \\
        --predictions benchmarks/results/detect-cot-looks3-v3/predictions.jsonl \\
        --out benchmarks/results/score-fallback

Stored results only: no model is called. The run is ``cot`` with three looks per claim on
the embedded model, so each judgement keeps every look's verdict and P(entailment). From
it, four support scores per response (the lowest over its checked sentences, each
sentence's the lowest over its judgements), as each backend would give them:

- ``logprobs``: the first look's P(entailment): one look on a backend with log-probabilities
  (the embedded model, OpenAI, vLLM); what ``score_method: logprobs`` is.
- ``logprobs x3``: the mean P(entailment) of three looks (``CONLI_NLI_LOOKS=3``).
- ``looks``: the share of three looks that passed the claim, read without the
  probabilities: what a backend without log-probabilities gives with ``CONLI_NLI_LOOKS=3``
  (``score_method: looks``).
- ``verdict``: the first look's verdict as 1 or 0: what such a backend gives with one look
  (``score_method: verdict``); it ranks only as the verdict does.

Each is AUROC of 1 - score for "any hallucination", per set; the rule
(``conli.evaluation.rule.decide``) compares ``looks`` with ``verdict`` (is the fallback
worth its three calls?) and ``looks`` with ``logprobs`` (what the fallback loses).
Nothing here was trained on these examples.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from conli.evaluation.detection import read_predictions
from conli.evaluation.rule import Paired, decide
from conli.version import source_commit

Score = Callable[[Mapping[str, Any]], float]
METHODS: dict[str, Score] = {
    "logprobs": lambda j: _first(j)["score"],
    "logprobs x3": lambda j: j["score"],
    "looks": lambda j: sum(look["verdict"] == "supported" for look in j["looks"])
    / len(j["looks"]),
    "verdict": lambda j: float(_first(j)["verdict"] == "supported"),
}


def _first(judgement: Mapping[str, Any]) -> Mapping[str, Any]:
    """The first look (the greedy one that a single-look check makes)."""
    looks = judgement.get("looks") or [judgement]
    return looks[0]  # type: ignore[no-any-return]


def response_score(result: Mapping[str, Any], method: Score) -> float | None:
    """The lowest sentence score; None where a judgement lacks what the method reads."""
    values = []
    for sentence in result["sentences"]:
        for judgement in sentence["judgements"] if sentence["checked"] else []:
            if not judgement.get("looks") or judgement.get("error"):
                return None
            value = method(judgement)
            if value is None:
                return None
            values.append(value)
    return min(values) if values else None


def by_set(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Per set: gold (1 = hallucinated) and each method's 1 - score, on the same examples."""
    sets: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if row.get("error") or not row.get("result"):
            continue
        scores = {name: response_score(row["result"], fn) for name, fn in METHODS.items()}
        if any(v is None for v in scores.values()):
            continue
        into = sets.setdefault(row["dataset"], {"gold": [], **{n: [] for n in METHODS}})
        into["gold"].append(float(row["gold"]))
        for name, value in scores.items():
            into[name].append(1.0 - float(value))  # type: ignore[arg-type]
    return sets


def paired(sets: Mapping[str, Mapping[str, list[float]]], candidate: str, current: str
           ) -> dict[str, Paired]:
    """Two methods' values on each set's examples, for the rule."""
    return {name: Paired([g > 0.5 for g in s["gold"]], s[candidate], s[current])
            for name, s in sets.items()}


def table(sets: Mapping[str, Mapping[str, list[float]]]) -> str:
    """AUROC of each method per set and on the mean of sets."""
    from sklearn.metrics import roc_auc_score

    names = list(METHODS)
    lines = ["| set | n (hallucinated) | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    means = {n: 0.0 for n in names}
    usable = {k: s for k, s in sets.items() if 0 < sum(s["gold"]) < len(s["gold"])}
    for key, s in usable.items():
        values = {n: 100 * roc_auc_score(s["gold"], s[n]) for n in names}
        for n in names:
            means[n] += values[n] / len(usable)
        lines.append(f"| {key} | {len(s['gold'])} ({int(sum(s['gold']))}) | "
                     + " | ".join(f"{values[n]:.1f}" for n in names) + " |")
    lines.append("| mean of sets | | " + " | ".join(f"**{means[n]:.1f}**" for n in names) + " |")
    return "\n".join(lines)


def main() -> None:
    """Score the stored run four ways and put the fallback to the rule."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--predictions", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = read_predictions(args.predictions)
    sets = by_set(rows)
    worth = decide(paired(sets, "looks", "verdict"))
    loses = decide(paired(sets, "looks", "logprobs"))
    commit = source_commit()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(
        {"examples": sum(len(s["gold"]) for s in sets.values()), "commit": commit,
         "looks_vs_verdict": worth.as_dict(), "looks_vs_logprobs": loses.as_dict()},
        indent=2) + "\n")
    (args.out / "results.md").write_text(
        f"# Support scores without log-probabilities (stored run, no model call)\n\n"
        f"- predictions: `{args.predictions}` (cot, 3 looks, embedded model)\n"
        f"- command: `python benchmarks/score_fallback.py --predictions {args.predictions} "
        f"--out {args.out}`\n- commit: `{commit}`\n\n"
        f"AUROC of 1 - score, hallucinated vs faithful:\n\n{table(sets)}\n\n"
        f"## looks (3 sampled verdicts' share) against verdict (one look)\n\n"
        f"{worth.table('looks', 'verdict')}\n\n"
        f"## looks against logprobs (one look's P(entailment))\n\n"
        f"{loses.table('looks', 'logprobs')}\n")
    print((args.out / "results.md").read_text())


if __name__ == "__main__":
    main()

"""A several-looks run (``CONLI_NLI_LOOKS=k``) against cot, under each way to read its looks.

    CONLI_NLI_LOOKS=3 conli eval detect --dataset all --limit 100 --seed 0 --detector cot \\
        --budget-minutes 100 --out benchmarks/results/detect-cot-looks3-v3
    python benchmarks/looks_gain.py \\
        --predictions benchmarks/results/detect-cot-looks3-v3/predictions.jsonl \\
        --features benchmarks/data/features/dev.jsonl --out benchmarks/results/paired-looks3-v3

Every NLI judgement of such a run keeps each look's verdict (``looks``, the greedy look
first), so one run answers several questions without another model call: the greedy look
alone (which should be cot again), the vote that runs (most looks pass), and two cheaper
rules that look again only where the first look flagged, or only where it passed. Each
is paired with cot's recorded verdicts as ``paired_gain`` does. The two cheaper rules are
read off the same looks: where the vote failed a sentence that the rule would pass, its
entity-level checks never ran, so those rules are approximations (the count is
reported). Choosing among rules after reading them is a choice on these examples; only
the vote is what ``nli_looks`` runs. A rule chosen here is scored on other examples by a
run of that rule alone, read with ``--exclude`` set to this run's predictions.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from conli.evaluation.paired import (
    compare,
    finish,
    parse_args,
    pct,
    read_run,
    run_flags,
    run_scores,
    signed,
    table_head,
)
from conli.training.data import read_rows

NLI = ("sentence_nli", "entity_nli")
Read = Callable[[list[bool]], bool]  # whether each look passed -> the judgement passes
READS: dict[str, Read] = {
    "greedy look alone": lambda p: p[0],
    "vote (what runs)": lambda p: 2 * sum(p) > len(p),
    "look again where the first flags": lambda p: p[0] or 2 * sum(p) > len(p),
    "look again where the first passes": lambda p: p[0] and 2 * sum(p) > len(p),
}


def read_flags(records: list[dict[str, Any]], read: Read) -> tuple[dict[str, bool], int]:
    """Each decided example's flag under ``read``; and how many examples it reads unsure.

    A judgement without looks (unverified, or decided another way) keeps its verdict. An
    example is unsure where ``read`` passes it while a sentence of it had its entity checks
    skipped because the vote failed that sentence. On a long source each claim keeps the
    window the vote chose, so the other reads see only that window.
    """
    flags, unsure = {}, 0
    for record in records:  # paired.read_run: the completed examples
        if not record.get("result"):
            continue
        flagged = missing = False
        for sentence in record["result"]["sentences"]:
            judged = [j for j in sentence.get("judgements", []) if j["detector"] in NLI]
            passes = [read([look["verdict"] == "supported" for look in j["looks"]])
                      if j.get("looks") else j["verdict"] == "supported" for j in judged]
            flagged |= not all(passes)
            voted_out = any(j["detector"] == "sentence_nli" and j["verdict"] != "supported"
                            for j in judged)
            missing |= voted_out and all(passes)
        flags[record["example_id"]] = flagged
        unsure += missing and not flagged  # a flag elsewhere settles the example anyway
    return flags, unsure


def cost(records: list[dict[str, Any]]) -> dict[str, float]:
    """Model time per example of the run, and what a fresh run would cost with k looks or one.

    The greedy look replays from the call cache (no model time), so the run's prefill is the
    source's (paid once, then cached) and its decode is that of the k - 1 sampled looks.
    A fresh run decodes k chains after the same prefill; cot alone decodes one. That holds
    only when every decided claim got k looks: under ``nli_looks_on = "flagged"`` the
    sampled decode covers the flagged claims alone, so only the measured times are given.
    """
    judged = [j for r in records if r.get("result") for s in r["result"]["sentences"]
              for j in s.get("judgements", [])
              if j["detector"] in NLI and j["verdict"] != "unverified"]
    counts = {len(j.get("looks") or []) for j in judged}
    looks = max(counts, default=0)
    usage = [r["result"]["usage"] for r in records if r.get("result")]
    if not usage or looks < 2:
        return {}
    prefill = sum(u["prefill_seconds"] for u in usage) / len(usage)
    decode = sum(u["decode_seconds"] for u in usage) / len(usage)
    spent = {"looks": looks, "examples": len(usage), "prefill_seconds": prefill,
             "sampled_decode_seconds": decode,
             "generated_tokens_all_looks": sum(u["completion_tokens"] for u in usage) / len(usage)}
    if counts != {looks}:  # some claims had one look: no per-look decode to extrapolate from
        return spent
    one = prefill + decode / (looks - 1)
    fresh = prefill + decode * looks / (looks - 1)
    return {**spent, "fresh_seconds_k_looks": fresh, "fresh_seconds_one_look": one,
            "ratio": fresh / one}


def markdown(reports: dict[str, dict[str, Any]], spent: dict[str, float]) -> str:
    """One row per reading of the looks, cot first, with the gain over cot."""
    first = next(iter(reports.values()))
    sets = list(first["sets"])
    lines = [*table_head(first, ["mean", "gain over cot [95%]", "unsure"]),
             f"| cot | {' | '.join(pct(first['cot'].get(d)) for d in [*sets, 'mean'])} | | |"]
    for name, report in reports.items():
        run = report["run"]
        gain = run["gain_interval"]
        cells = " | ".join(pct(run["per_set"].get(d)) for d in [*sets, "mean"])
        lines.append(f"| {name} | {cells} | {signed(gain[0])} [{signed(gain[1])}, "
                     f"{signed(gain[2])}] | {report['unsure']} |")
    auroc = first.get("auroc")
    if auroc:
        lines += ["", f"Pooled AUROC (1 - support; the run's support is its looks' mean): "
                      f"cot {pct(auroc['cot'])}, the run {pct(auroc['run'])}."]
    if spent:
        lines += ["", f"Cost per example (mean of {spent['examples']}): prefill "
                      f"{spent['prefill_seconds']:.1f} s, decode of the sampled looks "
                      f"{spent['sampled_decode_seconds']:.1f} s."]
    if "ratio" in spent:
        lines[-1] += (f" A fresh run with {spent['looks']} looks: about "
                      f"{spent['fresh_seconds_k_looks']:.1f} s against cot's "
                      f"{spent['fresh_seconds_one_look']:.1f} s ({spent['ratio']:.2f}x).")
    return "\n".join([*lines, f"{first['n']} paired examples.", ""])


def main(argv: list[str] | None = None) -> int:
    """Read a looks run and the features file; write results.json and results.md."""
    args = parse_args(__doc__, argv)
    meta, rows = read_rows(args.features)
    records = read_run(args.predictions, args.exclude)
    scores = run_scores(records)
    reports, flags_by = {}, {}
    for name, read in READS.items():
        flags_by[name], unsure = read_flags(records, read)
        reports[name] = {**compare(rows, flags_by[name], scores), "unsure": unsure}
    voted = run_flags(records)
    mismatched = sum(voted[k] != v for k, v in flags_by["vote (what runs)"].items())
    spent = cost(records)
    return finish(args, meta, "benchmarks/looks_gain.py", reports, markdown(reports, spent),
                  vote_differs_from_the_runs_verdict=mismatched, cost=spent)


if __name__ == "__main__":
    sys.exit(main())

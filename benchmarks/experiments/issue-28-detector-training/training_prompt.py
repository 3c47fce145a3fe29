"""Train fused on the v1 prompt's NLI outputs (as fused.v1 was) or the shipped v3's? Both held out.

    python benchmarks/experiments/issue-28-detector-training/training_prompt.py \\
        --features benchmarks/data/features/dev.jsonl \\
        --v1-predictions benchmarks/results/detect-default --out benchmarks/results/training-prompt

``fused.v1`` learnt its weights from the v1 prompt's NLI scores and verdicts, and runs on
the v3 prompt's. Whether retraining on v3's outputs is better is a question about the
training data alone, so it is asked leave-one-dataset-out with everything else equal:
each dev set is scored, on its v3 features, by a model fitted on the other seven sets'
rows with the NLI features from v1 (``detect-default``, the run fused.v1 read) or from v3
(the collection). ``pmi_low`` and the word features come from the model's reading, which
no prompt touches, so both sides share them. Examples whose two runs split the response
into different sentences are left out and counted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from conli.evaluation.paired import (
    gain_interval,
    held_decisions,
    pct,
    per_set,
    signed,
    trained_on,
    with_v1_nli,
)
from conli.evaluation.report import publish
from conli.signals.model import FUSED_ARTIFACT, SignalModel, load_model
from conli.training.data import ExampleRows, read_rows
from conli.training.train import (
    FUSED_FEATURES,
    FUSED_KEEP,
    FUSED_VERSION,
    HeldOut,
    fit,
    response_score,
)

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout


def lodo_decisions(train_rows: list[ExampleRows], test_rows: list[ExampleRows]
                   ) -> list[HeldOut]:
    """Each set of ``test_rows`` decided by fused fitted on the other sets of ``train_rows``."""
    held = []
    for dataset in sorted({r.dataset for r in test_rows}):
        model = fit([r for r in train_rows if r.dataset != dataset], FUSED_FEATURES,
                    FUSED_VERSION, FUSED_KEEP)
        test = [r for r in test_rows if r.dataset == dataset]
        held.append(HeldOut(dataset, len(test), None, 0.0, None, None, [],
                            [r.label for r in test],
                            [response_score(model, r) >= model.threshold for r in test]))
    return held


def compare(v3_rows: list[ExampleRows], v1_rows: list[ExampleRows],
            shipped: tuple[SignalModel, set[str]] | None = None) -> dict[str, Any]:
    """Per set and on the mean: cot, trained on v1, trained on v3; and the paired gains.

    With ``shipped`` (the shipped weights and the examples they were trained on), also the
    shipped weights against the v1-trained refit on the examples they never saw.
    """
    common = {r.example_id for r in v1_rows}
    rows = [r for r in v3_rows if r.example_id in common]
    by_v1 = lodo_decisions(v1_rows, rows)
    by_v3 = lodo_decisions(rows, rows)
    v1_flag = {r.example_id: f for h in by_v1 for r, f in zip(
        [r for r in rows if r.dataset == h.dataset], h.predicted, strict=True)}
    v3_flag = {r.example_id: f for h in by_v3 for r, f in zip(
        [r for r in rows if r.dataset == h.dataset], h.predicted, strict=True)}
    report: dict[str, Any] = {
        "n": len(rows),
        "cot": per_set(rows, ExampleRows.cot_flagged),
        "trained_on_v1": per_set(rows, lambda r: v1_flag[r.example_id]),
        "trained_on_v3": per_set(rows, lambda r: v3_flag[r.example_id]),
        "v3_over_v1": gain_interval(by_v3, rows, baseline=lambda r: v1_flag[r.example_id]),
        "v1_over_cot": gain_interval(by_v1, rows),
        "v3_over_cot": gain_interval(by_v3, rows),
    }
    if shipped is not None:
        model, seen = shipped
        unseen = [r for r in rows if r.example_id not in seen]

        def shipped_flag(r: ExampleRows) -> bool:
            return response_score(model, r) >= model.threshold

        report["unseen"] = {
            "version": model.version, "n": len(unseen),
            "cot": per_set(unseen, ExampleRows.cot_flagged),
            "shipped": per_set(unseen, shipped_flag),
            "trained_on_v1": per_set(unseen, lambda r: v1_flag[r.example_id]),
            "trained_on_v3": per_set(unseen, lambda r: v3_flag[r.example_id]),
            "v1_over_shipped": gain_interval(held_decisions(unseen, v1_flag), unseen,
                                             baseline=shipped_flag),
            "v3_over_shipped": gain_interval(held_decisions(unseen, v3_flag), unseen,
                                             baseline=shipped_flag)}
    return report


def markdown(report: dict[str, Any]) -> str:
    """The per-set table and the paired gains."""
    sets = [d for d in report["cot"] if d != "mean"]
    lines = [f"| fused, leave-one-dataset-out | {' | '.join(sets)} | mean |",
             "|---|" + "---|" * (len(sets) + 1)]
    for name, key in (("cot (no training)", "cot"), ("trained on v1 NLI outputs", "trained_on_v1"),
                      ("trained on v3 NLI outputs", "trained_on_v3")):
        lines.append(f"| {name} | " + " | ".join(pct(report[key].get(d))
                                                 for d in [*sets, "mean"]) + " |")

    def gain(interval: tuple[float, float, float]) -> str:
        point, low, high = interval
        return f"{signed(point)} [{signed(low)}, {signed(high)}]"

    lines += ["", f"{report['n']} examples scored on v3 features. Gain on the mean of sets "
              f"[95%]: v3 over v1 {gain(report['v3_over_v1'])}; v1 over cot "
              f"{gain(report['v1_over_cot'])}; v3 over cot {gain(report['v3_over_cot'])}."]
    unseen = report.get("unseen")
    if unseen and unseen["n"]:
        lines += ["", f"On the {unseen['n']} examples the shipped weights ({unseen['version']}) "
                  "never saw:", "", f"| decision | {' | '.join(sets)} | mean |",
                  "|---|" + "---|" * (len(sets) + 1)]
        for name, key in (("cot", "cot"), (f"{unseen['version']}, as shipped", "shipped"),
                          ("trained on v1 NLI outputs, LODO", "trained_on_v1"),
                          ("trained on v3 NLI outputs, LODO", "trained_on_v3")):
            lines.append(f"| {name} | " + " | ".join(pct(unseen[key].get(d))
                                                     for d in [*sets, "mean"]) + " |")
        lines += ["", "Over the shipped weights, on the mean of sets [95%]: trained on v1 "
                  f"{gain(unseen['v1_over_shipped'])}, trained on v3 "
                  f"{gain(unseen['v3_over_shipped'])}."]
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    """Read both runs' features; write results.json and results.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--features", type=Path, default=Path("benchmarks/data/features/dev.jsonl"))
    parser.add_argument("--v1-predictions", type=Path,
                        default=Path("benchmarks/results/detect-default"))
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    meta, rows = read_rows(args.features)
    v1_rows, unmatched = with_v1_nli(rows, args.v1_predictions)
    model = load_model(FUSED_ARTIFACT)
    report = {**compare(rows, v1_rows, (model, trained_on(model, args.data_dir))),
              "unmatched": unmatched}
    table = markdown(report) + f"Left out, split differently by the two runs: {unmatched}.\n"
    record = {"command": " ".join(["python", SCRIPT, *sys.argv[1:]]),
              "features": str(args.features), "features_commit": meta.get("git_commit"),
              "v1_predictions": str(args.v1_predictions), "result": report}
    return publish(args.out, record, table)


if __name__ == "__main__":
    sys.exit(main())

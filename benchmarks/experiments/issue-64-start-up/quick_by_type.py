"""Issue 64: the ``quick`` detector's recall by error type, from stored runs (no model call).

    python benchmarks/experiments/issue-64-start-up/quick_by_type.py \\
        --error-types benchmarks/data/error-types \\
        --yesno-run benchmarks/results/error-types-yesno/predictions.jsonl.gz \\
        --fused-run benchmarks/results/error-types-fused/predictions.jsonl.gz \\
        --out benchmarks/results/quick-by-type

``quick`` reads two numbers of a sentence: ``yesno``'s P(supported) and the reading's
``pmi_low``. Both were stored for every planted error and control: the first by the
``yesno`` run, the second in ``fused``'s judgements (the same forward reading). The shipped
``quick.v1`` weighs them; the unstated-entity rule (the entities the ``yesno`` run tagged)
and the swap rule (``conli.ner.swaps``) run after it, as in the product. ``quick.v1`` was
fitted on dev examples whose sources these share, so the figures are not held out.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from conli.evaluation.detection import Outcome, read_predictions
from conli.evaluation.loaders import load_file
from conli.evaluation.one_token import sentence_support
from conli.evaluation.report import git_state, publish
from conli.ner.swaps import swaps_of
from conli.signals.model import QUICK_ARTIFACT, load_model
from conli.text.language import stop_words
from conli.training.error_types import TYPES

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout
SIDES = ("error", "control")
ARMS = ("quick", "quick + unstated rule", "quick + both rules (as shipped)")


def quick_flags(yes: Outcome, fused: Outcome) -> list[bool]:
    """Each checked sentence flagged by quick.v1 from the two stored runs' numbers."""
    model = load_model(QUICK_ARTIFACT)
    assert yes.result is not None and fused.result is not None
    pmi = {s.index: j.features["pmi_low"] for s in fused.result.sentences if s.checked
           for j in s.judgements if j.detector == "fused"}
    out = []
    for s in yes.result.sentences:
        if s.checked:
            p_yes = next(j.score for j in s.judgements if j.detector == "yesno")
            values = {"pmi_low": pmi[s.index], "yes_p": float(p_yes or 0.0)}
            out.append(model.probability(values) >= model.threshold)
    return out


def by_type(folder: Path, yes_run: Path, fused_run: Path) -> dict[str, dict[str, int]]:
    """Errors caught and controls flagged by each arm, by type."""
    yes = {o.example_id: o for o in read_predictions(yes_run, Outcome.from_json)}
    fused = {o.example_id: o for o in read_predictions(fused_run, Outcome.from_json)}
    stop = stop_words("en")
    out = {}
    for kind in TYPES:
        counts: Counter[str] = Counter()
        for example in load_file(folder / f"{kind}.jsonl"):
            o = yes[example.id]
            assert o.result is not None
            alone = any(quick_flags(o, fused[example.id]))
            unstated = any(rule for _, rule in sentence_support(o.result, "yesno"))
            reader = swaps_of(example.source, stop)
            swap = any(reader.swap(s.text) is not None for s in o.result.sentences if s.checked)
            side = SIDES[0] if example.label else SIDES[1]
            counts[side] += 1
            for arm, flagged in zip(ARMS, (alone, alone or unstated,
                                           alone or unstated or swap), strict=True):
                counts[f"{side} {arm}"] += flagged
        out[kind] = dict(counts)
    return out


def markdown(result: dict[str, Any]) -> str:
    """One row a type: errors caught and controls flagged, of each side's count."""
    head = " | ".join(f"{side}s: {arm}" for side in SIDES for arm in ARMS)
    lines = ["# Issue 64: quick's recall by error type (stored runs, no model call)", "",
             f"- commit: `{result['provenance']['git_commit']}`", "",
             f"| type | {head} |", "|---" * (1 + 2 * len(ARMS)) + "|"]
    total: Counter[str] = Counter()
    for c in result["by_type"].values():
        total.update(c)
    for kind, c in [*result["by_type"].items(), ("**all**", total)]:
        cells = [f"{c.get(f'{side} {arm}', 0)}/{c[side]}" for side in SIDES for arm in ARMS]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--error-types", type=Path, required=True)
    parser.add_argument("--yesno-run", type=Path, required=True)
    parser.add_argument("--fused-run", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    commit, dirty = git_state()
    result = {"provenance": {"command": " ".join(["python", SCRIPT, *sys.argv[1:]]),
                             "git_commit": commit, "git_dirty": dirty},
              "by_type": by_type(args.error_types, args.yesno_run, args.fused_run)}
    return publish(args.out, result, markdown(result))


if __name__ == "__main__":
    raise SystemExit(main())

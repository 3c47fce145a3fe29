"""Issue 44, item 4: would the grounded judge rank better on cot's verdicts than on fused's?

    python benchmarks/experiments/issue-44-judge-on-cot/judge_on_cot.py \\
        --predictions benchmarks/results/detect-fused-v3/predictions.jsonl \\
        --cot-run benchmarks/results/detect-cot-v3/predictions.jsonl \\
        --features benchmarks/data/features/dev.jsonl \\
        --rubric benchmarks/results/judge-auroc-unseen-63/results.json \\
        --out benchmarks/results/judge-on-cot

Stored results only: no model is called. The grounded judge's score is the product's own
(``conli.judges.grounded.evidence`` and the shipped ``load_scale()``), computed from
two sets of sentence verdicts on the same examples:

- current (what ships): the fused detector's stored verdicts,
  ``conli.evaluation.judge_eval.stored_grounded_scores``;
- candidate: chain of thought's verdicts, derived from the same stored run. The fused
  judgement keeps NLI's verdict (feature ``nli_flagged``), its support (``nli_support``,
  the lowest P(entailment) of NLI's judgements: what a cot ``SentenceResult.score`` is) and
  its lead judgement (the first flagged NLI judgement, sentence level before entity level:
  its ``label`` and its ``template``, ``nli_sentence.*`` or ``nli_entity.*``). A sentence NLI
  flagged whose lead is an entity judgement had no sentence-level flag: cot's finding is
  ``minor``; a sentence-level lead is a ``contradiction`` or (neutral) ``unsupported``. These
  are rebuilt as cot ``SentenceResult`` records (a ``sentence_nli`` judgement, plus an
  ``entity_nli`` one for an entity-only flag) and scored by the product's functions.

Each is scored as AUROC of 6 - score for "any hallucination" and the two are put to the
project's rule (``conli.evaluation.rule.decide``, metric AUROC, paired bootstrap per set).
fused.v1 was trained on the first ``--skip`` (37) examples of each set in the file's order:
the decision is on the rest (as ``conli eval judge-auroc --skip 37``); all 800 are reported
for reference. ``--cot-run`` (a real cot run) checks the derivation where it overlaps: the
grounded score from its own sentences against the one derived here.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conli.evaluation.decision_options import add_fused_run, decision_parser
from conli.evaluation.detection import predictions_digest, read_predictions
from conli.evaluation.grounded_pairs import decision, severity, table
from conli.evaluation.judge_eval import stored_grounded_scores
from conli.evaluation.paired import pct
from conli.evaluation.rule import held_out
from conli.judges.grounded import Scale, evidence, load_scale
from conli.models import CheckResult, Entity, Judgement, SentenceResult

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout

NLI_UNSCORED = 0.5  # fused.nli_features' support when NLI read no probability


@dataclass(frozen=True)
class Example:
    """One stored example: its gold label and both detectors' grounded scores."""

    example_id: str
    dataset: str
    gold: bool
    fused: float  # grounded on fused's stored verdicts (what ships)
    cot: float  # grounded on cot's derived verdicts
    cot_sentences: list[SentenceResult]


def cot_sentence(sentence: SentenceResult, counts: Counter[str]) -> SentenceResult:
    """The cot ``SentenceResult`` a fused run's stored sentence implies."""
    if not sentence.checked:
        return sentence
    fused = next((j for j in sentence.judgements if j.detector == "fused"), None)
    if fused is None:
        raise ValueError(f"sentence {sentence.index} has no fused judgement")
    features = fused.features or {}
    base = {"index": sentence.index, "text": sentence.text, "start": sentence.start,
            "end": sentence.end, "checked": True, "entities": sentence.entities}
    hyp = sentence.text
    if fused.verdict == "unverified" or "nli_flagged" not in features:
        counts["unverified (NLI did not check it)"] += 1  # fused leaves these unverified too
        return SentenceResult(**base, verdict="unverified", reasons=[fused.error or ""],
                              judgements=[Judgement(detector="sentence_nli", hypothesis=hyp,
                                                    verdict="unverified", error=fused.error)])
    support = float(features["nli_support"])
    counts["support exactly 0.5 (may be unscored)"] += support == NLI_UNSCORED
    if not features["nli_flagged"]:
        counts["supported"] += 1
        return SentenceResult(**base, verdict="supported", score=support, judgements=[
            Judgement(detector="sentence_nli", hypothesis=hyp, verdict="supported",
                      label="entailment", score=support)])
    lead = (fused.template or "").split("+")[0]
    entity_level = lead.startswith("nli_entity") or (not lead and fused.entity is not None)
    if not lead.startswith(("nli_entity", "nli_sentence")):
        counts["flagged, lead template unknown"] += 1
    reason = fused.reasoning
    if entity_level:
        counts[f"flagged, entity level only ({fused.label})"] += 1
        entity = fused.entity or Entity(text="", label="", category="", start=0, end=0)
        judgements = [Judgement(detector="sentence_nli", hypothesis=hyp, verdict="supported",
                                label="entailment"),
                      Judgement(detector="entity_nli", hypothesis=hyp, verdict="hallucinated",
                                label=fused.label, entity=entity)]
    else:
        counts[f"flagged, sentence level ({fused.label})"] += 1
        if fused.label != "contradiction" and features.get("nli_contradiction"):
            counts["sentence-level neutral lead but a contradiction elsewhere"] += 1
        judgements = [Judgement(detector="sentence_nli", hypothesis=hyp,
                                verdict="hallucinated", label=fused.label)]
    return SentenceResult(**base, verdict="hallucinated", detector=judgements[-1].detector,
                          reasons=[reason], score=support, judgements=judgements)


def read_examples(path: Path, scale: Scale, counts: Counter[str]) -> list[Example]:
    """Every stored example with a result, in the file's order, scored both ways."""
    current = {(i, d): (g, s) for i, d, g, s in stored_grounded_scores(path, scale)}
    out = []
    for record in read_predictions(path):
        if not record.get("result"):
            continue
        sentences = [cot_sentence(s, counts)
                     for s in CheckResult.model_validate(record["result"]).sentences]
        share, _ = evidence(sentences)
        gold, fused = current[(record["example_id"], record["dataset"])]
        out.append(Example(record["example_id"], record["dataset"], gold, fused, scale(share),
                           sentences))
    return out


def check_cot_run(examples: Sequence[Example], path: Path, scale: Scale) -> dict[str, Any]:
    """The grounded score from a real cot run's own sentences against the derived one."""
    derived = {e.example_id: e for e in examples}
    counts: Counter[str] = Counter()
    differ = []
    for record in read_predictions(path):
        if not record.get("result"):
            continue
        counts["examples in the cot run"] += 1
        mine = derived.get(record["example_id"])
        if mine is None:
            counts["not in the fused run"] += 1
            continue
        real = CheckResult.model_validate(record["result"]).sentences
        share, _ = evidence(real)
        score = scale(share)
        counts["compared"] += 1
        counts["score agrees exactly"] += score == mine.cot
        counts["score within 1e-9"] += abs(score - mine.cot) < 1e-9
        theirs = {s.index: s for s in real}
        for sentence in mine.cot_sentences:
            other = theirs.get(sentence.index)
            if other is None or not sentence.checked:
                continue
            counts["checked sentences"] += 1
            counts["sentence verdict agrees"] += other.verdict == sentence.verdict
            counts["sentence severity agrees"] += severity(other) == severity(sentence)
            counts["sentence score agrees exactly"] += other.score == sentence.score
        if abs(score - mine.cot) >= 1e-9:
            differ.append({"example_id": record["example_id"], "cot run": score,
                           "derived": mine.cot})
    return {**dict(counts), "differing": differ}


def check_features(examples: Sequence[Example], path: Path) -> dict[str, int]:
    """The derived cot verdicts against the ``cot`` verdicts ``training.data`` exported."""
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    exported = {(r["id"], s["index"]): s.get("cot")
                for r in (json.loads(line) for line in lines if line.strip())
                for s in r["sentences"]}
    counts: Counter[str] = Counter()
    for example in examples:
        for sentence in example.cot_sentences:
            if not sentence.checked:
                continue
            theirs = exported.get((example.example_id, sentence.index))
            counts["checked sentences"] += 1
            counts["in the features file"] += theirs is not None
            counts["cot verdict agrees"] += theirs == sentence.verdict
    return dict(counts)


def rubric_context(examples: Sequence[Example], path: Path) -> dict[str, Any]:
    """A stored judge-auroc run's rubric AUROC beside both grounded ones, same examples."""
    from conli.evaluation.metrics import auroc

    by_id = {e.example_id: e for e in examples}
    stored = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    for name, block in stored.get("datasets", {}).items():
        rows = [(s, by_id[s["id"]]) for s in block.get("sample", [])
                if s.get("rubric") is not None and s["id"] in by_id]
        if not rows:
            continue
        gold = [e.gold for _, e in rows]
        out[name] = {"n": len(rows), "rubric": auroc(gold, [6 - s["rubric"] for s, _ in rows]),
                     "grounded on fused": auroc(gold, [6 - e.fused for _, e in rows]),
                     "grounded on cot": auroc(gold, [6 - e.cot for _, e in rows])}
    return out


def cot_decision(examples: Sequence[Example], draws: int) -> dict[str, Any]:
    """cot (candidate) against fused (current) by the rule, AUROC of 6 - score."""
    return decision(examples, lambda e: e.cot, lambda e: e.fused, draws)


# --- the report ------------------------------------------------------------------------

def cot_table(d: Mapping[str, Any]) -> list[str]:
    """A decision of cot against fused as the results show it."""
    return table(d, "cot", "fused", current_column="grounded on fused (ships)")


def markdown(report: Mapping[str, Any]) -> str:
    p = report["provenance"]
    out = ["# Issue 44 (4): the grounded judge on cot's verdicts instead of fused's", "",
           f"- command: `{p['command']}`",
           f"- commit: `{p['git_commit']}`{' (dirty working tree)' if p['git_dirty'] else ''}",
           f"- predictions: `{p['predictions']}` (sha256 `{p['predictions_sha256'][:16]}…`)",
           f"- scale: `{p['scale']}` (shipped, `load_scale()`); score = "
           "`load_scale()(evidence(sentences)[0])`",
           "- current: grounded on the fused run's stored verdicts "
           "(`judge_eval.stored_grounded_scores`); candidate: grounded on cot's verdicts "
           "derived from the same run's NLI features (see the script's docstring)",
           f"- rule: `conli.evaluation.rule.decide(metric=\"auroc\", draws={p['draws']})` on "
           "6 - score; no model called", "",
           f"## Held out: the first {p['skip']} examples of each set skipped (fused.v1's "
           "training rows)", "", *cot_table(report["held_out"]), "",
           "## All 800 examples (reference only: fused was trained on 291 of them)", "",
           *cot_table(report["all"]), ""]
    rubric = report.get("rubric_context")
    if rubric:
        out += ["## Beside the rubric judge (stored run, same held-out examples)", "",
                f"From `{p['rubric']}`; point AUROCs only, not paired.", "",
                "| set | n | rubric | grounded on fused | grounded on cot |",
                "|---|---|---|---|---|"]
        out += [f"| {name} | {r['n']} | {pct(r['rubric'])} | {pct(r['grounded on fused'])} "
                f"| {pct(r['grounded on cot'])} |" for name, r in rubric.items()]
        out.append("")
    out += ["## Checks", "", "```json", json.dumps(report["checks"], indent=1), "```", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = decision_parser(__doc__.split("\n")[0])
    add_fused_run(parser, features="the exported features: checks the derived cot verdicts")
    parser.add_argument("--rubric", type=Path, default=None,
                        help="a judge-auroc results.json with rubric scores (context only)")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv

    from conli.evaluation.report import git_state, publish

    commit, dirty = git_state()
    scale = load_scale()
    counts: Counter[str] = Counter()
    examples = read_examples(args.predictions, scale, counts)
    checks: dict[str, Any] = {"examples": len(examples), "cot derivation": dict(counts)}
    if args.cot_run:
        checks["grounded on cot: derived vs the cot run's own sentences"] = check_cot_run(
            examples, args.cot_run, scale)
    if args.features:
        checks["cot verdicts: derived vs the features file"] = check_features(
            examples, args.features)
    kept = held_out(examples, args.skip)
    report: dict[str, Any] = {
        "provenance": {
            "command": " ".join(["python", SCRIPT, *argv]),
            "git_commit": commit, "git_dirty": dirty,
            "predictions": str(args.predictions),
            "predictions_sha256": predictions_digest(args.predictions),
            "cot_run": str(args.cot_run) if args.cot_run else None,
            "features": str(args.features) if args.features else None,
            "rubric": str(args.rubric) if args.rubric else None,
            "scale": scale.version, "skip": args.skip, "draws": args.draws},
        "checks": checks,
        "held_out": cot_decision(kept, args.draws),
        "all": cot_decision(examples, args.draws),
    }
    if args.rubric:
        report["rubric_context"] = rubric_context(kept, args.rubric)
    report["scores"] = [{"id": e.example_id, "dataset": e.dataset, "gold": e.gold,
                         "grounded_fused": e.fused, "grounded_cot": e.cot} for e in examples]
    return publish(args.out, report, markdown(report))


if __name__ == "__main__":
    sys.exit(main())

"""Issue 64: would the grounded judge rank as well on quick's verdicts as on fused's?

    python benchmarks/experiments/issue-44-judge-on-cot/judge_on_quick.py \\
        --heldout benchmarks/results/yesno-heldout/predictions.jsonl.gz \\
        --features benchmarks/data/features/dev.jsonl \\
        --predictions benchmarks/results/detect-fused-v3/predictions.jsonl \\
        --quick-run benchmarks/results/quick-repro/predictions.jsonl.gz \\
        --demo benchmarks/results/demo-paired \\
        --out benchmarks/results/judge-on-quick

Stored results only: no model is called. The question of ``judge_on_cot.py`` asked of the
detector ``quick`` (``signals/quick.v1.json``: a logistic regression over the reading's
``pmi_low`` and the one-token check's P(supported), ``yes_p``), were it the default on the
embedded model instead of ``fused``. The grounded judge's score is the product's own
(``conli.judges.grounded.evidence`` and the shipped ``load_scale()``), computed on the 509
dev examples fused.v1 never saw (``--heldout``, the stored ``yesno`` run on them), from:

- candidate: quick's sentence verdicts, held out. For each dev set, quick's classifier is
  fitted on the other seven sets (``training.train.fit`` over ``pmi_low`` and ``yes_p``,
  as ``leave_one_dataset_out`` fits it) and judges each checked sentence of the set as the
  detector does: P(hallucinated) from ``pmi_low`` (``--features``) and the stored ``yesno``
  P(supported), flagged at the fit's threshold; a flagged sentence is ``hallucinated`` with
  no label, a passed one ``supported`` (``entailment``); its score is 1 - P. Then the
  unstated-entity rule, which runs after every detector, is applied by the product's own
  ``graph.grounding.unstated_rule`` to the entities the run recorded (their ``in_source``
  as ``ground`` found it): a passed sentence with a decisive name, number or date the
  source never states is flagged, by an entity-level judgement, so its finding is
  ``minor``. quick flags never carry ``contradiction``: its findings are ``unsupported``.
- current: fused.v1's stored verdicts on the same examples (``--predictions``, the v3
  collection; ``judge_eval.stored_grounded_scores``, as ``judge_on_cot.py`` reads them).
  That run predates the unstated-entity rule; the product runs it after fused too, so the
  decision is also given against fused's verdicts with the rule applied alike ("fused +
  rule", the entities read from the same ``--heldout`` run, as ``one_token.rule_flags``
  reads them for fused.v1's decisions).

Each is scored as AUROC of 6 - score for "any hallucination" and put to the project's rule
(``conli.evaluation.rule.decide``, metric AUROC, paired bootstrap per set). The swap rule
(on by default) is left out on both sides: on these 509 it fires on one sentence of one
faithful example (benchmarks/results/swap-rule). Checks: quick's held-out flags against
``leave_one_dataset_out``'s; with the shipped ``quick.v1``, the derived sentences against a
real quick run's (``--quick-run``); and the README demo (``--demo``, the paired demo run's
detect-only JSONs): its grounded score on fused's verdicts and on quick.v1's from the same
readings.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conli.evaluation.decision_options import decision_parser
from conli.evaluation.detection import Outcome, predictions_digest, read_predictions
from conli.evaluation.grounded_pairs import decision, severity, table
from conli.evaluation.judge_eval import stored_grounded_scores
from conli.evaluation.one_token import with_support_feature
from conli.graph.grounding import unstated_rule
from conli.judges.grounded import Scale, evidence, load_scale
from conli.models import CheckResult, Entity, Judgement, SentenceResult
from conli.ner.grounding import SourceMentions, decisive
from conli.signals.model import QUICK_ARTIFACT, SignalModel, load_model
from conli.training.data import ExampleRows, read_rows
from conli.training.train import fit, leave_one_dataset_out

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout
FEATURES = ("pmi_low", "yes_p")  # quick.v1's, in its order
ONE_TOKEN = "yesno"  # the stored run's detector, whose P(supported) is quick's yes_p
CLOSE = 1e-3  # a stored score is rounded to 4 places


class Recorded(SourceMentions):
    """The source as ``ground`` recorded it: an entity is unstated where ``in_source`` is False.

    What ``unstated_rule`` asks of the source, answered from a stored run's entities, so the
    product's rule runs on them as it runs after any detector (``one_token.sentence_support``
    reads the rule the same way).
    """

    def __init__(self) -> None:
        super().__init__("")

    def unstated(self, entities: Iterable[Entity]) -> list[Entity]:
        """The decisive entities ``ground`` found the source never states."""
        return [e for e in entities if decisive(e) and e.in_source is False]


RECORDED = Recorded()


@dataclass(frozen=True)
class Example:
    """One held-out example: its gold label and the grounded score each way."""

    example_id: str
    dataset: str
    gold: bool
    quick: float  # grounded on quick's held-out verdicts, with the rule
    fused: float  # grounded on fused's stored verdicts
    fused_rule: float  # the same with the rule applied
    sentences: list[SentenceResult] = field(compare=False, repr=False)


def quick_sentence(sentence: SentenceResult, values: Mapping[str, float] | None,
                   model: SignalModel) -> SentenceResult:
    """The sentence as detector quick (``model``) and the merge leave it, before the rules.

    ``values``: its ``pmi_low`` and ``yes_p``; None where either is missing, which quick
    leaves unverified (the reading never passes a sentence alone).
    """
    if not sentence.checked:
        return sentence
    base = {"index": sentence.index, "text": sentence.text, "start": sentence.start,
            "end": sentence.end, "checked": True, "entities": sentence.entities}
    if values is None:
        why = "the one-token check or the reading gave this sentence nothing"
        return SentenceResult(**base, verdict="unverified", reasons=[why], judgements=[
            Judgement(detector="quick", hypothesis=sentence.text, verdict="unverified",
                      error=why)])
    p = model.probability(dict(values))
    flagged = p >= model.threshold
    judgement = Judgement(
        detector="quick", hypothesis=sentence.text,
        verdict="hallucinated" if flagged else "supported",
        label=None if flagged else "entailment", score=1.0 - p,
        reasoning=f"P(unsupported) = {p:.2f} from the signals", features=dict(values))
    return SentenceResult(**base, verdict=judgement.verdict,
                          detector="quick" if flagged else None,
                          reasons=[judgement.reasoning] if flagged else [],
                          score=judgement.score, score_method="classifier",
                          judgements=[judgement])


def quick_sentences(result: CheckResult, row: ExampleRows | None,
                    model: SignalModel) -> list[SentenceResult]:
    """Every sentence of a stored run's result as quick judges it, then the rule."""
    values = {s.index: s.values for s in row.sentences} if row else {}
    out = []
    for sentence in result.sentences:
        mine = values.get(sentence.index)
        read = {name: mine[name] for name in FEATURES} if mine and all(
            name in mine for name in FEATURES) else None
        out.append(ruled(quick_sentence(sentence, read, model)))
    return out


def ruled(sentence: SentenceResult, entities: list[Entity] | None = None) -> SentenceResult:
    """The unstated-entity rule on a checked sentence (its ``entities`` replaced if given)."""
    if not sentence.checked:
        return sentence
    if entities is not None:
        sentence = sentence.model_copy(update={"entities": entities})
    return unstated_rule(sentence, RECORDED)


def held_out_models(featured: Sequence[ExampleRows]) -> dict[str, SignalModel]:
    """For each set, quick's classifier fitted on the other sets' rows."""
    return {held: fit([r for r in featured if r.dataset != held], FEATURES, "refit")
            for held in sorted({r.dataset for r in featured})}


def read_examples(heldout: Sequence[Outcome], featured: Sequence[ExampleRows],
                  models: Mapping[str, SignalModel], predictions: Path, scale: Scale,
                  counts: Counter[str]) -> list[Example]:
    """The held-out examples fused's run also holds, in the held-out run's order."""
    current = {i: (g, s) for i, _, g, s in stored_grounded_scores(predictions, scale)}
    fused_runs = {r["example_id"]: CheckResult.model_validate(r["result"])
                  for r in read_predictions(predictions) if r.get("result")}
    rows = {r.example_id: r for r in featured}
    out = []
    for outcome in heldout:
        counts["held-out examples"] += 1
        if outcome.result is None or outcome.example_id not in current:
            counts["left out: no result in one of the runs"] += 1
            continue
        gold, fused = current[outcome.example_id]
        if gold != outcome.gold:
            raise ValueError(f"{outcome.example_id}: the runs' gold labels differ")
        row = rows.get(outcome.example_id)
        counts["without features (quick leaves them unverified)"] += row is None
        sentences = quick_sentences(outcome.result, row, models[outcome.dataset])
        entities = {s.index: s.entities for s in outcome.result.sentences}
        fused_ruled = [ruled(s, entities.get(s.index, []))
                       for s in fused_runs[outcome.example_id].sentences]
        if [(s.index, s.text) for s in fused_ruled] != [(s.index, s.text) for s in sentences]:
            raise ValueError(f"{outcome.example_id}: the runs cut the response differently")
        for name, mine in (("quick", sentences), ("fused + rule", fused_ruled)):
            counts.update(f"{name}: {severity(s)}" for s in mine if s.checked)
        out.append(Example(outcome.example_id, outcome.dataset, gold,
                           scale(evidence(sentences)[0]), fused,
                           scale(evidence(fused_ruled)[0]), sentences))
    return out


# --- checks ------------------------------------------------------------------------------

def check_flags(examples: Sequence[Example], featured: Sequence[ExampleRows]) -> dict[str, int]:
    """quick's response flags (before the rule) against ``leave_one_dataset_out``'s."""
    held = leave_one_dataset_out(featured, features=FEATURES, version="refit", keep=())
    theirs = {r.example_id: bool(p) for h in held
              for r, p in zip([r for r in featured if r.dataset == h.dataset], h.predicted,
                              strict=True)}
    counts: Counter[str] = Counter()
    for example in examples:
        mine = any(j.detector == "quick" and j.verdict == "hallucinated"
                   for s in example.sentences for j in s.judgements)
        counts["examples"] += 1
        counts["flag agrees with leave_one_dataset_out"] += theirs.get(example.example_id) == mine
    return dict(counts)


def check_quick_run(path: Path, heldout: Sequence[Outcome], featured: Sequence[ExampleRows],
                    scale: Scale) -> dict[str, Any]:
    """The shipped quick.v1 on the stored readings against a real quick run's sentences."""
    model = load_model(QUICK_ARTIFACT)
    stored = {o.example_id: o.result for o in heldout if o.result is not None}
    rows = {r.example_id: r for r in featured}
    counts: Counter[str] = Counter()
    differ = []
    for outcome in read_predictions(path, Outcome.from_json):
        if outcome.result is None or outcome.example_id not in stored:
            counts["not compared (no result, or not held out)"] += 1
            continue
        derived = quick_sentences(stored[outcome.example_id], rows.get(outcome.example_id),
                                  model)
        real = outcome.result.sentences
        counts["examples compared"] += 1
        for mine, theirs in zip(derived, real, strict=True):
            if not theirs.checked:
                continue
            counts["checked sentences"] += 1
            counts["verdict agrees"] += mine.verdict == theirs.verdict
            counts["severity agrees"] += severity(mine) == severity(theirs)
            counts["rule flags in the run"] += any(j.entity is not None and
                                                   j.verdict == "hallucinated"
                                                   for j in theirs.judgements)
            counts["score within 1e-3"] += (mine.score is not None and theirs.score is not None
                                            and abs(mine.score - theirs.score) < CLOSE)
        ours, run = scale(evidence(derived)[0]), scale(evidence(real)[0])
        counts["grounded score within 1e-3"] += abs(ours - run) < CLOSE
        if abs(ours - run) >= CLOSE:
            differ.append({"example_id": outcome.example_id, "run": run, "derived": ours})
    return {**dict(counts), "differing": differ}


def demo(folder: Path, scale: Scale) -> dict[str, Any]:
    """The README demo's grounded score on fused's verdicts and on quick.v1's, same readings.

    quick's ``yes_p`` from the yesno detect run, its ``pmi_low`` from fused's (the reading
    both make); the judge's own score from the full fused run, for reference.
    """
    def result(name: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(gzip.decompress((folder / name).read_bytes()))
        return found

    fused, yesno = result("fused-detect-1.json.gz"), result("yesno-detect-1.json.gz")
    full = result("fused-full-1.json.gz")
    fused_sentences = CheckResult.model_validate(fused).sentences
    asked = CheckResult.model_validate(yesno)
    read = {s.index: j.features["pmi_low"] for s in fused_sentences for j in s.judgements
            if j.detector == "fused" and "pmi_low" in j.features}
    yes = {s.index: j.score for s in asked.sentences for j in s.judgements
           if j.detector == ONE_TOKEN and j.score is not None}
    model = load_model(QUICK_ARTIFACT)
    quick = [ruled(quick_sentence(s, {"pmi_low": read[s.index], "yes_p": yes[s.index]}
                                  if s.index in read and s.index in yes else None, model))
             for s in asked.sentences]
    return {"grounded on fused": scale(evidence(fused_sentences)[0]),
            "judge_raw in the full fused run": (full.get("judge_raw") or {}).get("score"),
            "grounded on quick.v1": scale(evidence(quick)[0]),
            "quick.v1 severities": [severity(s) for s in quick],
            "fused severities": [severity(s) for s in fused_sentences]}


# --- the report ----------------------------------------------------------------------------

def said(d: Mapping[str, Any]) -> str:
    """Whether the decision holds as a speed change: no significant cost in accuracy."""
    holds = d["holds"]  # rule.Decision.holds: the rule for a safety or speed change
    lost = "" if d["losses"] else "No set's interval lies wholly below zero. "
    return (f"{lost}As a speed change (the mean of sets' interval reaches zero, its point no "
            f"worse than -1 point, no set lost) it {'**holds**' if holds else '**fails**'}.")


def markdown(report: Mapping[str, Any]) -> str:
    """The results page: provenance, both decisions, the demo and the checks."""
    p = report["provenance"]
    dirty = " (dirty working tree)" if p["git_dirty"] else ""
    facts = {
        "command": f"`{p['command']}`",
        "commit": f"`{p['git_commit']}`{dirty}",
        "held-out run": f"`{p['heldout']}` (sha256 `{p['heldout_sha256'][:16]}…`): the 509 "
                        "dev examples fused.v1 never saw; quick's `yes_p` is its yesno "
                        f"P(supported), `pmi_low` from `{p['features']}`",
        "fused's run": f"`{p['predictions']}` (sha256 `{p['predictions_sha256'][:16]}…`)",
        "scale": f"`{p['scale']}` (shipped, `load_scale()`); score = "
                 "`load_scale()(evidence(sentences)[0])`",
        "candidate": "grounded on quick's verdicts, its classifier fitted on the other seven "
                     "sets for each set, with the unstated-entity rule; current: grounded on "
                     "fused's stored verdicts (see the script's docstring)",
        "rule": f"`conli.evaluation.rule.decide(metric=\"auroc\", draws={p['draws']})` on "
                "6 - score; no model called"}
    out = ["# Issue 64: the grounded judge on quick's verdicts instead of fused's", "",
           *(f"- {name}: {value}" for name, value in facts.items()), ""]
    for key, heading, current in (
            ("against_fused", "quick + rule against fused's stored verdicts", "fused"),
            ("against_fused_rule", "quick + rule against fused + rule (the rule on both, as "
             "the product runs it)", "fused + rule")):
        out += [f"## {heading}", "", *table(report[key], "quick", current), "",
                said(report[key]), ""]
    shown = report.get("demo")
    if shown:
        out += ["## The README demo (shipped quick.v1 on the paired demo run's readings)", "",
                f"grounded on fused: {shown['grounded on fused']:.2f} (the full run's judge: "
                f"{shown['judge_raw in the full fused run']}); grounded on quick.v1: "
                f"{shown['grounded on quick.v1']:.2f}. Severities, fused: "
                f"{', '.join(shown['fused severities'])}; quick: "
                f"{', '.join(shown['quick.v1 severities'])}.", ""]
    out += ["## Checks", "", "```json", json.dumps(report["checks"], indent=1), "```", ""]
    return "\n".join(out)


# what the script reads: (option, required, help); each a path
OPTIONS = (
    ("--heldout", True, "the stored yesno run on the examples fused.v1 never saw"),
    ("--features", True, "the exported features (pmi_low) of the dev examples"),
    ("--predictions", True, "fused's stored detect run on every dev example"),
    ("--quick-run", False, "a real quick run on some held-out examples: checks the derivation"),
    ("--demo", False, "the paired README demo run's folder (its detect-only JSONs)"),
)


def measure(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """Both decisions, the checks and each example's scores, from the stored runs."""
    from conli.evaluation.report import git_state

    scale = load_scale()
    heldout = read_predictions(args.heldout, Outcome.from_json)
    featured = with_support_feature(read_rows(args.features)[1], heldout, ONE_TOKEN)
    models = held_out_models(featured)
    counts: Counter[str] = Counter()
    examples = read_examples(heldout, featured, models, args.predictions, scale, counts)
    checks: dict[str, Any] = {
        "derivation": dict(counts),
        "thresholds fitted leave-one-dataset-out": {d: round(m.threshold, 4)
                                                    for d, m in models.items()},
        "quick flags: derived vs leave_one_dataset_out": check_flags(examples, featured)}
    if args.quick_run:
        checks["quick.v1: derived vs the real quick run"] = check_quick_run(
            args.quick_run, heldout, featured, scale)
    commit, dirty = git_state()
    paths = {name: str(getattr(args, name)) if getattr(args, name) else None
             for name in ("heldout", "features", "predictions", "quick_run", "demo")}
    report: dict[str, Any] = {
        "provenance": {"command": command, "git_commit": commit, "git_dirty": dirty, **paths,
                       "heldout_sha256": predictions_digest(args.heldout),
                       "predictions_sha256": predictions_digest(args.predictions),
                       "scale": scale.version, "draws": args.draws},
        "checks": checks,
        "against_fused": decision(examples, lambda e: e.quick, lambda e: e.fused, args.draws),
        "against_fused_rule": decision(examples, lambda e: e.quick, lambda e: e.fused_rule,
                                       args.draws),
    }
    if args.demo:
        report["demo"] = demo(args.demo, scale)
    report["scores"] = {"columns": "id gold grounded_quick grounded_fused grounded_fused_rule",
                        "rows": [f"{e.example_id} {int(e.gold)} {e.quick:.4f} {e.fused:.4f} "
                                 f"{e.fused_rule:.4f}" for e in examples]}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = decision_parser(__doc__.split("\n")[0])
    for option, required, what in OPTIONS:
        parser.add_argument(option, type=Path, required=required, default=None, help=what)
    args = parser.parse_args(argv)
    words = sys.argv[1:] if argv is None else argv
    report = measure(args, " ".join(["python", SCRIPT, *words]))

    from conli.evaluation.report import publish

    return publish(args.out, report, markdown(report))


if __name__ == "__main__":
    sys.exit(main())

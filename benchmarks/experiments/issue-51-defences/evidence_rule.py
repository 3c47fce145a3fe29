"""Issue 47: never pass a sentence on the model's word alone when the result shows it empty.

    python benchmarks/experiments/issue-51-defences/evidence_rule.py \\
        --predictions benchmarks/results/detect-fused-v3/predictions.jsonl \\
        --cot-run benchmarks/results/detect-cot-v3/predictions.jsonl \\
        --features benchmarks/data/features/dev.jsonl --data-dir ../shared/data \\
        --out benchmarks/results/evidence-rule

Stored results only: no model is called. A ``supported`` sentence is caught by

- (a) its entailment's quoted evidence is not in the source (``evidence_in_source`` false on
  the entailment that passed it: for ``cot`` the sentence-level NLI judgement, for ``fused``
  the lead NLI judgement its own judgement carries), or
- (b) a decisive entity (a number, date or name: ``DECISIVE``) the source does not state
  (``Entity.in_source`` false, as ``ner.grounding.SourceMentions.mentions`` normalises),

and each rule (a), (b), (a)+(b) is applied either way: the sentence becomes ``unverified``
or is flagged ``hallucinated`` with a reason. The response's prediction is recomputed as the
evaluation does (hallucinated if any checked sentence is, else unverified if any is, else
supported) and scored as it does: an ``unverified`` prediction is the wrong class for its
gold label. Each variant against the stored verdicts is put to the project's rule
(``conli.evaluation.rule.decide``, balanced accuracy, paired bootstrap per set).

Detectors. ``fused``: the stored run's own sentence verdicts (fused.collect is fused.v1 with
``nli_prior`` weighted 0, so the same decisions); fused.v1 was trained on the first examples
of each set in that file's order, so the first ``--skip`` (37) of each set are left out.
``cot``: chain of thought's verdict derived from the same run as ``training.data`` derives it
(a sentence is flagged when the ``nli_flagged`` feature is set); cot is not trained, so all
examples count. ``--cot-run`` (a real cot run) and ``--features`` (the exported rows' cot
verdicts) check that derivation where they overlap; ``--data-dir`` re-derives every stored
``in_source`` and ``evidence_in_source`` from the data with today's ``SourceMentions``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conli.evaluation.decision_options import add_fused_run, decision_parser
from conli.evaluation.detection import predictions_digest, read_predictions
from conli.evaluation.metrics import flag
from conli.gate import response_verdict

SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout

# Numbers, dates and names: what a sentence's claim turns on. PersonType (nationalities,
# groups: spaCy's NORP) and Skill are descriptions, not names, and are left out.
DECISIVE = ("Quantity", "DateTime", "Person", "Location", "Organization", "Event", "Product")
NLI = ("sentence_nli", "entity_nli")
RULES: dict[str, tuple[str, ...]] = {"a": ("a",), "b": ("b",), "a+b": ("a", "b"),
                                      "c": ("c",)}
ACTIONS = ("unverified", "flag")


@dataclass(frozen=True)
class Sentence:
    """What the rules and the two detectors need of one checked sentence."""

    index: int
    fused: str | None  # the fused detector's verdict (None: fused did not run)
    cot: str  # chain of thought's verdict
    label: str | None  # the NLI label of the entailment that passed it (cot: sentence level)
    evidence: str
    evidence_in_source: bool | None
    absent: tuple[tuple[str, str], ...]  # decisive entities not in the source: (text, category)
    text: str = ""
    # (c) what the product's rule finds unstated: every claim re-tagged, values normalised
    unstated: tuple[tuple[str, str], ...] = ()

    def fires(self, rule: str) -> bool:
        """Whether rule ``a``, ``b`` or ``c`` finds the model's word empty here."""
        if rule == "a":
            return self.label == "entailment" and self.evidence_in_source is False
        if rule == "c":
            return bool(self.unstated)
        return bool(self.absent)

    def reason(self, rules: Iterable[str]) -> str:
        """Why the rule would not pass this sentence on the model's word."""
        said = []
        if "a" in rules and self.fires("a"):
            said.append(f"the entailment's quoted evidence is not in the source: "
                        f"\"{self.evidence}\"")
        if "b" in rules and self.fires("b"):
            said.append("the source never states " + ", ".join(
                f"\"{text}\" ({category})" for text, category in self.absent))
        if "c" in rules and self.fires("c"):
            said.append("the source never states (c) " + ", ".join(
                f"\"{text}\" ({category})" for text, category in self.unstated))
        return "; ".join(said)


@dataclass
class Record:
    """One stored example: its gold label and checked sentences."""

    example_id: str
    dataset: str
    gold: bool
    predicted: str | None
    sentences: list[Sentence] = field(default_factory=list)


def sentence_of(raw: Mapping[str, Any], categories: Sequence[str]) -> Sentence:
    """A stored ``SentenceResult`` (JSON) read for the rules.

    A fused run keeps only the fused judgement: it carries the lead NLI judgement's label
    and evidence, and NLI's own verdict as the ``nli_flagged`` feature. A cot run keeps NLI's
    judgements: the sentence-level one is the entailment that passed the sentence.
    """
    judgements = raw["judgements"]
    fused = next((j for j in judgements if j["detector"] == "fused"), None)
    absent = tuple((e["text"], e["category"]) for e in raw.get("entities", [])
                   if e.get("in_source") is False and e["category"] in categories)
    if fused is not None:
        features = fused.get("features") or {}
        if fused["verdict"] == "unverified" or "nli_flagged" not in features:
            cot = "unverified"  # fused leaves a sentence NLI could not check unverified
        else:
            cot = "hallucinated" if features["nli_flagged"] else "supported"
        return Sentence(raw["index"], fused["verdict"], cot, fused.get("label"),
                        fused.get("evidence", ""), fused.get("evidence_in_source"), absent,
                        raw.get("text", ""))
    nli = [j["verdict"] for j in judgements if j["detector"] in NLI]
    cot = ("supported" if nli and all(v == "supported" for v in nli)
           else "unverified" if not nli or "unverified" in nli else "hallucinated")
    lead = next((j for j in judgements if j["detector"] == "sentence_nli"),
                judgements[0] if judgements else {})
    return Sentence(raw["index"], None, cot, lead.get("label"), lead.get("evidence", ""),
                    lead.get("evidence_in_source"), absent, raw.get("text", ""))


def read_records(path: Path, categories: Sequence[str]) -> list[Record]:
    """A detect run's ``predictions.jsonl``: every example that has a result, in run order."""
    records = []
    for raw in read_predictions(path):
        result = raw.get("result")
        if raw.get("error") is not None or not result:
            continue
        records.append(Record(raw["example_id"], raw["dataset"], bool(raw["gold"]),
                              raw.get("predicted"),
                              [sentence_of(s, categories) for s in result["sentences"]
                               if s.get("checked")]))
    return records


Verdicts = Callable[[Sentence], str]
DETECTORS: dict[str, Verdicts] = {"fused": lambda s: s.fused or "unverified",
                                  "cot": lambda s: s.cot}


@dataclass(frozen=True)
class Applied:
    """One variant on one example: the prediction before and after, and what changed."""

    before: str
    after: str
    changed: list[tuple[int, str, str]]  # (sentence index, new verdict, reason)


def apply(record: Record, verdict_of: Verdicts, rules: Sequence[str], action: str) -> Applied:
    """The variant on one example: each supported sentence the rules catch is changed."""
    new = "unverified" if action == "unverified" else "hallucinated"
    before, after, changed = [], [], []
    for sentence in record.sentences:
        verdict = verdict_of(sentence)
        before.append(verdict)
        if verdict == "supported" and any(sentence.fires(r) for r in rules):
            changed.append((sentence.index, new, sentence.reason(rules)))
            verdict = new
        after.append(verdict)
    return Applied(response_verdict(before), response_verdict(after), changed)


def by_set(records: Sequence[Record]) -> dict[str, list[Record]]:
    """Records grouped by data set, sets in the order they first appear."""
    out: dict[str, list[Record]] = {}
    for record in records:
        out.setdefault(record.dataset, []).append(record)
    return out


def firing(records: Sequence[Record], verdict_of: Verdicts) -> dict[str, Any]:
    """Per set: supported sentences each rule catches, and the responses they sit in."""
    out: dict[str, Any] = {}
    for name, mine in {**by_set(records), "all": list(records)}.items():
        counts: Counter[str] = Counter()
        for record in mine:
            counts["responses"] += 1
            counts["hallucinated" if record.gold else "faithful"] += 1
            supported = [s for s in record.sentences if verdict_of(s) == "supported"]
            counts["sentences"] += len(record.sentences)
            counts["supported"] += len(supported)
            for rule in ("a", "b", "c"):  # whatever the verdict: how often the result shows it
                counts[f"{rule}:any verdict"] += sum(s.fires(rule) for s in record.sentences)
            for rule, parts in RULES.items():
                hits = sum(any(s.fires(r) for r in parts) for s in supported)
                counts[f"{rule}:sentences"] += hits
                if hits:
                    counts[f"{rule}:{'hallucinated' if record.gold else 'faithful'}"] += 1
        out[name] = dict(counts)
    return out


def evaluate(records: Sequence[Record], verdict_of: Verdicts, draws: int) -> dict[str, Any]:
    """Every variant against the stored verdicts, by the project's rule."""
    from conli.evaluation.rule import Paired, decide

    sets = by_set(records)
    out: dict[str, Any] = {}
    for rule, parts in RULES.items():
        for action in ACTIONS:
            paired, changed = {}, {}
            for name, mine in sets.items():
                done = [(apply(r, verdict_of, parts, action), r.gold) for r in mine]
                gold = [g for _, g in done]
                paired[name] = Paired(gold, [flag(a.after, g) for a, g in done],  # the one flag
                                      [flag(a.before, g) for a, g in done])
                moves = Counter(f"{'hallucinated' if g else 'faithful'}: {a.before} -> {a.after}"
                                for a, g in done if a.before != a.after)
                changed[name] = {"responses": sum(moves.values()),
                                 "faithful": sum(v for k, v in moves.items()
                                                 if k.startswith("faithful")),
                                 "hallucinated": sum(v for k, v in moves.items()
                                                     if k.startswith("hallucinated")),
                                 "moves": dict(sorted(moves.items()))}
            decision = decide(paired, metric="bacc", draws=draws)
            out[f"{rule} {action}"] = {"rules": list(parts), "action": action,
                                       "decision": decision.as_dict(), "changed": changed}
    return out


def scored_as_the_evaluation(records: Sequence[Record], verdict_of: Verdicts) -> dict[str, float]:
    """Each set's BAcc of the stored verdicts by ``evaluation.metrics`` (a check of ``flag``)."""
    from conli.evaluation.metrics import balanced_accuracy, confusion

    out = {}
    for name, mine in by_set(records).items():
        predicted = [response_verdict(verdict_of(s) for s in r.sentences) for r in mine]
        matrix = confusion([r.gold for r in mine], predicted)  # type: ignore[arg-type]
        out[name] = balanced_accuracy(*matrix.as_wrong())
    return out


# --- checks of the data the figures rest on ----------------------------------------------

def check_stored(records: Sequence[Record]) -> dict[str, int]:
    """The fused sentences' verdicts give each example's stored prediction."""
    agree = sum(response_verdict(s.fused or "unverified" for s in r.sentences) == r.predicted
                for r in records)
    return {"examples": len(records), "prediction_recomputed": agree}


def check_cot_run(records: Sequence[Record], cot_run: Sequence[Record]) -> dict[str, Any]:
    """cot derived from the fused run against a real cot run, on the examples both hold."""
    ours = {r.example_id: r for r in records}
    counts: Counter[str] = Counter()
    for theirs in cot_run:
        mine = ours.get(theirs.example_id)
        if mine is None:
            counts["not in the fused run"] += 1
            continue
        counts["examples"] += 1
        counts["response verdict agrees"] += (response_verdict(s.cot for s in mine.sentences)
                                              == theirs.predicted)
        pairs = {s.index: s for s in mine.sentences}
        for sentence in theirs.sentences:
            other = pairs.get(sentence.index)
            if other is None:
                counts["sentence missing"] += 1
                continue
            counts["sentences"] += 1
            counts["sentence verdict agrees"] += other.cot == sentence.cot
            if sentence.cot == "supported" == other.cot:
                counts["supported sentences"] += 1
                counts["(a) agrees"] += other.fires("a") == sentence.fires("a")
                counts["(b) agrees"] += other.absent == sentence.absent
                counts["(a) fires in the cot run"] += sentence.fires("a")
                counts["(b) fires in the cot run"] += sentence.fires("b")
    return dict(counts)


def check_features(records: Sequence[Record], path: Path) -> dict[str, int]:
    """cot derived here against the ``cot`` verdicts ``training.data`` exported."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]
            if line.strip()]
    exported = {(r["id"], s["index"]): s.get("cot") for r in rows for s in r["sentences"]}
    counts: Counter[str] = Counter()
    for record in records:
        for sentence in record.sentences:
            theirs = exported.get((record.example_id, sentence.index))
            counts["sentences"] += 1
            counts["in the features file"] += theirs is not None
            counts["cot verdict agrees"] += theirs == sentence.cot
    return dict(counts)


def sentence_gold(path: Path) -> dict[tuple[str, int], bool | None]:
    """Each exported sentence's gold label, where it is known (None otherwise)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]
            if line.strip()]
    return {(r["id"], s["index"]): s.get("label") for r in rows for s in r["sentences"]}


def fired_sentence_gold(records: Sequence[Record], verdict_of: Verdicts,
                        labels: Mapping[tuple[str, int], bool | None]) -> dict[str, Any]:
    """Of supported sentences whose gold label is known: how many are hallucinated, by rule."""
    counts: Counter[str] = Counter()
    for record in records:
        for sentence in record.sentences:
            if verdict_of(sentence) != "supported":
                continue
            label = labels.get((record.example_id, sentence.index))
            if label is None:
                continue
            for rule, parts in {**RULES, "neither": ()}.items():
                hit = any(sentence.fires(r) for r in parts) if parts else not any(
                    sentence.fires(r) for r in ("a", "b"))
                if hit:
                    counts[f"{rule}:known"] += 1
                    counts[f"{rule}:hallucinated"] += bool(label)
    return dict(counts)


def retag(records: Sequence[Record], data_dir: Path) -> list[Record]:
    """Rule (c) as the product runs it: each claim tagged by the default NER, looked up
    with ``SourceMentions.unstated`` (numbers, dates and names normalised)."""
    from dataclasses import replace

    from conli.config import Settings
    from conli.evaluation.loaders import DATASETS, load_dataset
    from conli.ner import get_recognizer
    from conli.ner.grounding import SourceMentions
    from conli.text.nlp import load_pipeline

    sources = {e.id: e.source for name in DATASETS for e in load_dataset(name, data_dir)}
    ner = get_recognizer(Settings(), load_pipeline())
    out = []
    for record in records:
        mentions = SourceMentions(sources[record.example_id])
        sentences = [replace(s, unstated=tuple((e.text, e.category) for e in
                                               mentions.unstated(ner.entities(s.text))))
                     for s in record.sentences]
        out.append(replace(record, sentences=sentences))
    return out


def recheck(predictions: Path, data_dir: Path) -> dict[str, int]:
    """Every stored ``in_source`` and ``evidence_in_source`` re-derived from the data now."""
    from conli.evaluation.loaders import DATASETS, load_dataset
    from conli.ner.grounding import SourceMentions

    sources = {e.id: e.source for name in DATASETS for e in load_dataset(name, data_dir)}
    counts: Counter[str] = Counter()
    for raw in read_predictions(predictions):
        if not raw.get("result") or raw["example_id"] not in sources:
            counts["examples without a source"] += 1
            continue
        mentions = SourceMentions(sources[raw["example_id"]])
        for sentence in raw["result"]["sentences"]:
            for entity in sentence.get("entities", []):
                if entity.get("in_source") is None:
                    continue
                counts["entities"] += 1
                counts["entity in_source agrees"] += (mentions.mentions(entity["text"])
                                                      == entity["in_source"])
            for judgement in sentence["judgements"]:
                if judgement.get("evidence_in_source") is None or not judgement.get("evidence"):
                    continue
                counts["quotes"] += 1
                counts["evidence_in_source agrees"] += (mentions.quotes(judgement["evidence"])
                                                        == judgement["evidence_in_source"])
    return dict(counts)


# --- the report ------------------------------------------------------------------------

def pct(value: float) -> str:
    return f"{100 * value:.1f}"


def gain(g: Mapping[str, float]) -> str:
    return f"{100 * g['gain']:+.1f} [{100 * g['low']:+.1f}, {100 * g['high']:+.1f}]"


def variant_table(variant: Mapping[str, Any]) -> list[str]:
    """One variant: per set current vs candidate, the paired gain, responses changed."""
    decision, changed = variant["decision"], variant["changed"]
    lines = ["| set | n (hallucinated) | BAcc current | BAcc candidate | gain [95% interval] "
             "| responses changed (faithful / hallucinated) |",
             "|---|---|---|---|---|---|"]
    for name, row in decision["per_set"].items():
        moved = changed[name]
        lines.append(f"| {name} | {row['n']} ({row['hallucinated']}) | {pct(row['current'])} | "
                     f"{pct(row['candidate'])} | {gain(row)} | {moved['responses']} "
                     f"({moved['faithful']} / {moved['hallucinated']}) |")
    rows = decision["per_set"].values()
    current = sum(r["current"] for r in rows) / len(rows)
    candidate = sum(r["candidate"] for r in rows) / len(rows)
    total = sum(m["responses"] for m in changed.values())
    faithful = sum(m["faithful"] for m in changed.values())
    lines.append(f"| mean of sets | | {pct(current)} | {pct(candidate)} | "
                 f"**{gain(decision['mean'])}** | {total} ({faithful} / {total - faithful}) |")
    verdict = "**wins**" if decision["wins"] else "does not win"
    losses = (f"; sets whose interval lies wholly below zero: {', '.join(decision['losses'])}"
              if decision["losses"] else "")
    lines += ["", f"By the rule the variant {verdict}{losses}."]
    return lines


def firing_table(counts: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Per set: supported sentences, those each rule catches, and the responses they are in."""
    lines = ["| set | responses (faithful / hallucinated) | checked sentences | supported "
             "| (a) sentences | (a) responses F / H | (b) sentences | (b) responses F / H "
             "| (a)+(b) sentences | (a)+(b) responses F / H |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, c in counts.items():
        cells = [f"{c.get('responses', 0)} ({c.get('faithful', 0)} / "
                 f"{c.get('hallucinated', 0)})", str(c.get("sentences", 0)),
                 str(c.get("supported", 0))]
        for rule in RULES:
            cells += [str(c.get(f"{rule}:sentences", 0)),
                      f"{c.get(f'{rule}:faithful', 0)} / {c.get(f'{rule}:hallucinated', 0)}"]
        label = "**all**" if name == "all" else name
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def summary_table(detectors: Mapping[str, Any]) -> list[str]:
    lines = ["| detector (examples) | variant | mean BAcc current | mean BAcc candidate "
             "| mean-of-sets gain [95%] | sets lost (interval < 0) | responses changed "
             "| wins |", "|---|---|---|---|---|---|---|---|"]
    for detector, report in detectors.items():
        for name, variant in report["variants"].items():
            d = variant["decision"]
            rows = d["per_set"].values()
            lines.append(
                f"| {detector} ({report['examples']}) | ({name}) "
                f"| {pct(sum(r['current'] for r in rows) / len(rows))} "
                f"| {pct(sum(r['candidate'] for r in rows) / len(rows))} | {gain(d['mean'])} "
                f"| {', '.join(d['losses']) or '–'} "
                f"| {sum(m['responses'] for m in variant['changed'].values())} "
                f"| {'yes' if d['wins'] else 'no'} |")
    return lines


def markdown(report: Mapping[str, Any]) -> str:
    p = report["provenance"]
    out = ["# Issue 47: evidence the verdict can stand on (stored results, no model calls)", "",
           f"- command: `{p['command']}`",
           f"- commit: `{p['git_commit']}`{' (dirty working tree)' if p['git_dirty'] else ''}",
           f"- predictions: `{p['predictions']}` (sha256 `{p['predictions_sha256'][:16]}…`), "
           f"written by `{p['run_command']}` at `{p['run_commit']}`",
           f"- fused: held out, the first {p['skip']} examples of each set in that file's "
           f"order skipped; cot: derived from the same file's NLI features, all examples",
           f"- decisive categories for (b): {', '.join(p['categories'])}",
           f"- rule: `conli.evaluation.rule.decide(metric=\"bacc\", draws={p['draws']})`; an "
           "`unverified` response is scored as the wrong class", "",
           "## Summary", "", *summary_table(report["detectors"]), ""]
    for detector, r in report["detectors"].items():
        every = r["firing"]["all"]
        out += [f"## {detector}: where the rules fire ({r['examples']} examples)", "",
                "Supported sentences (by this detector) each rule catches, and the responses "
                "(gold faithful F / gold hallucinated H) that hold at least one.", "",
                *firing_table(r["firing"]), "",
                f"Whatever the verdict, of the {every['sentences']} checked sentences (a) holds "
                f"on {every.get('a:any verdict', 0)} and (b) on {every.get('b:any verdict', 0)}.",
                ""]
        if "firing_all_examples" in r:
            out += [f"The same on all {r['firing_all_examples']['all']['responses']} examples "
                    "(training rows included; descriptive only):", "",
                    *firing_table(r["firing_all_examples"]), ""]
        known = r.get("sentence_gold")
        if known:
            parts = [f"{rule}: {known.get(f'{rule}:hallucinated', 0)} of "
                     f"{known.get(f'{rule}:known', 0)}" for rule in (*RULES, "neither")]
            out += ["Supported sentences with a known gold sentence label, hallucinated of "
                    "known: " + "; ".join(parts) + ".", ""]
        for name, variant in r["variants"].items():
            out += [f"### {detector}, variant ({name})", "", *variant_table(variant), ""]
    out += ["## Checks", "", "```json", json.dumps(report["checks"], indent=1), "```", ""]
    return "\n".join(out)


def provenance(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    from conli.evaluation.report import git_state

    commit, dirty = git_state()
    run = args.predictions.parent / "results.json"
    ran = json.loads(run.read_text(encoding="utf-8"))["provenance"] if run.exists() else {}
    return {"command": " ".join(["python", SCRIPT, *argv]),
            "git_commit": commit, "git_dirty": dirty,
            "predictions": str(args.predictions),
            "predictions_sha256": predictions_digest(args.predictions),
            "run_command": ran.get("command"), "run_commit": ran.get("git_commit"),
            "cot_run": str(args.cot_run) if args.cot_run else None,
            "cot_run_sha256": predictions_digest(args.cot_run) if args.cot_run else None,
            "features": str(args.features) if args.features else None,
            "data_dir": str(args.data_dir) if args.data_dir else None,
            "skip": args.skip, "categories": list(args.categories), "draws": args.draws}


def main(argv: list[str] | None = None) -> int:
    parser = decision_parser(__doc__.split("\n")[0])
    add_fused_run(parser, features="the exported features (cot verdicts, sentence gold labels)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="the dev data: re-derive the stored in_source flags")
    parser.add_argument("--categories", nargs="+", default=list(DECISIVE))
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv

    records = read_records(args.predictions, args.categories)
    if args.data_dir:
        records = retag(records, args.data_dir)
    from conli.evaluation.rule import held_out

    examples = {"fused": held_out(records, args.skip), "cot": records}
    checks: dict[str, Any] = {"stored predictions": check_stored(records)}
    if args.cot_run:
        checks["cot derived vs the cot run"] = check_cot_run(
            records, read_records(args.cot_run, args.categories))
    if args.features:
        checks["cot derived vs the features file"] = check_features(records, args.features)
    if args.data_dir:
        checks["stored flags re-derived from the data"] = recheck(args.predictions,
                                                                  args.data_dir)
    labels = sentence_gold(args.features) if args.features else {}
    detectors: dict[str, Any] = {}
    for name, mine in examples.items():
        verdict_of = DETECTORS[name]
        report = {"examples": len(mine), "firing": firing(mine, verdict_of),
                  "variants": evaluate(mine, verdict_of, args.draws)}
        if len(mine) != len(records):
            report["firing_all_examples"] = firing(records, verdict_of)
        if labels:
            report["sentence_gold"] = fired_sentence_gold(mine, verdict_of, labels)
        current = scored_as_the_evaluation(mine, verdict_of)
        some = next(iter(report["variants"].values()))["decision"]["per_set"]
        checks[f"{name}: BAcc as evaluation.metrics scores it"] = all(
            abs(current[s] - some[s]["current"]) < 1e-12 for s in some)
        detectors[name] = report

    result = {"provenance": provenance(args, argv), "checks": checks, "detectors": detectors}
    from conli.evaluation.report import publish

    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "changes.jsonl").open("w", encoding="utf-8") as out:
        for detector, mine in examples.items():
            for record in mine:
                done = apply(record, DETECTORS[detector], ("a", "b"), "flag")
                for index, _, reason in done.changed:
                    out.write(json.dumps({"detector": detector, "example_id": record.example_id,
                                          "dataset": record.dataset, "gold": record.gold,
                                          "sentence": index, "before": done.before,
                                          "after (a)+(b) flag": done.after,
                                          "reason": reason}, ensure_ascii=False) + "\n")
    return publish(args.out, result, markdown(result))


if __name__ == "__main__":
    sys.exit(main())

"""Issue 61 by the safety rule: the deterministic layer before and after, on the dev sets.

    python benchmarks/experiments/issue-51-defences/entity_rule_61.py --old c4c8e8c \\
        --data-dir ../shared/data --features benchmarks/data/features/dev.jsonl \\
        --baseline benchmarks/results/yesno-heldout --out benchmarks/results/safety-61-entity-rule

No model call. Issue 61 changed the rules no model's label can move: the unstated-entity
rule reads each claim in its own language, compares numbers and dates as values in any
language and names through their short forms; the word list that withheld text addressed
to the checker and flagged a sentence speaking to it only names a chunk in a note now.

Each side is the product's own code: the commit ``--old`` (its ``src`` by ``git archive``)
and this checkout. A child of each puts every example through that code's ``split``,
``select``, ``ground`` and ``merge`` nodes with a stand-in detector that passes every
checked sentence, so a sentence comes out flagged exactly where the layer flags one the
detectors passed. fused.v1 + the layer flags a response when fused.v1 does (its stored
reading, ``--features``, at its shipped threshold) or the layer flags one of its
sentences, as ``evaluation.one_token.decide_one_token`` builds what ships. New against old
by ``rule.decide`` (BAcc, paired bootstrap) and its safety rule (``Decision.holds``), on
the 509 examples fused.v1 never saw (``paired.trained_on``), on all 800 with a stored
reading (291 trained on), and the layer alone on every dev example (no fitted parameter).

Checks: the old side's flags on the 509 are those the stored run ``--baseline`` recorded
(``one_token.rule_flags``) and give its decision's ``fused.v1 + rule`` per set. The word
list's part in a verdict is measured where it finds something (``addressing``): on the
dev sets and the injection table's cases (``--cases``; no figure rests on them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout
STORED = "stored"  # the stand-in detector: it passes every checked sentence
SHOWN = 4  # examples shown of each direction in results.md
CASES = "injection"  # the injection table's cases: the word list's check only, no figure


# --- a child: one side's code on every example -------------------------------------------

class Passes:
    """The stand-in detector ``merge`` counts: it supersedes nothing."""

    name = STORED
    supersedes: frozenset[str] = frozenset()


def tag(examples: Path, into: Path) -> None:
    """Every example through the ``conli`` on ``PYTHONPATH``: what its layer flags, and why.

    One JSON line an example: the checked sentences' count, the flagged ones (index, text,
    the rules that flagged it and their reasons), the language the claims were read in,
    the sentences whose names were not compared (and the language each was read in), the
    sources its notes name, and (where the code withholds) which texts it would withhold
    from the models. Where the word list found anything, the example runs again with it
    finding nothing (``grounding.addressed``), and the sentences flagged then are kept.
    """
    from conli.config import Settings
    from conli.detectors.base import Deps
    from conli.graph import grounding, nodes
    from conli.models import Judgement
    from conli.ner import get_recognizer
    from conli.run.request import Request
    from conli.text import addressing
    from conli.text.nlp import load_pipeline

    settings = Settings()
    nlp = load_pipeline()
    deps = Deps(backend=None, ner=get_recognizer(settings, nlp), nlp=nlp,  # type: ignore[arg-type]
                settings=settings, detectors={STORED: Passes()})  # type: ignore[dict-item]
    runtime = SimpleNamespace(context=deps)
    withhold = getattr(addressing, "withhold", None)
    with examples.open(encoding="utf-8") as lines, into.open("w", encoding="utf-8") as out:
        for line in lines:
            example = json.loads(line)
            texts = Request.of(example["source"], example["response"], limits=settings,
                               question=example.get("question")).texts
            state, sentences = layer(texts, runtime, nodes, grounding, Judgement)
            notes = state.get("notes", [])
            row: dict[str, Any] = {
                "id": example["id"], "language": state["language"],
                "checked": sum(s.checked for s in sentences),
                "flagged": [{"index": s.index, "text": s.text,
                             "rules": [j.detector for j in s.judgements if j.detector != STORED],
                             "reasons": s.reasons}
                            for s in sentences if s.checked and s.verdict != "supported"],
                "named": sorted({n.source for n in notes if n.kind == "addressed"}),
                # a sentence whose names were not compared (all: the whole check's)
                "skipped": {str(getattr(n, "sentence", None)).replace("None", "all"):
                            n.language for n in notes if n.kind == "skipped"}}
            if withhold is not None:
                row["withheld"] = [name for name, text in (
                    ("source", texts.source), ("question", texts.question or ""),
                    *((f"sentence {s.index}", s.text) for s in sentences if s.checked))
                    if withhold(text) != text]
            if row["named"] or row.get("withheld") or any(
                    "addresses_checker" in f["rules"] for f in row["flagged"]):
                real = grounding.addressed
                grounding.addressed = lambda _text: []  # the word list finds nothing
                try:
                    _, without = layer(texts, runtime, nodes, grounding, Judgement)
                finally:
                    grounding.addressed = real
                row["flagged without the word list"] = [
                    s.index for s in without if s.checked and s.verdict != "supported"]
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def layer(texts: Any, runtime: Any, nodes: Any, grounding: Any, judgement: Any
          ) -> tuple[dict[str, Any], list[Any]]:
    """One check's texts through ``split``, ``select``, ``ground`` and ``merge``.

    Every checked sentence has the stand-in detector's ``supported``: ``merge`` flags the
    ones the deterministic layer flags. Returns the state and the merged sentences.
    """
    state: dict[str, Any] = {
        "source": texts.source, "response": texts.response, "question": texts.question,
        "points": texts.points, "source_map": texts.source_map}
    state.update(nodes.split(state, runtime))
    state.update(nodes.select(state))
    state["judgements"] = {s.index: [judgement(detector=STORED, hypothesis=s.text,
                                               verdict="supported")]
                           for s in state["segments"] if s.checked}
    state.update(grounding.ground(state, runtime))
    return state, nodes.merge(state, runtime)["sentences"]


def run_sides(examples: Path, old: str, work: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Both sides' tags, each from a child with that side's ``src`` first on the path."""
    (work / "checkout").mkdir()
    subprocess.run(["tar", "-x", "-C", str(work / "checkout")], check=True, input=subprocess.run(
        ["git", "archive", old, "src"], cwd=ROOT, check=True, capture_output=True).stdout)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    children = {}
    for side, src in (("old", work / "checkout" / "src"), ("new", ROOT / "src")):
        into = work / f"{side}.jsonl"
        children[side] = subprocess.Popen(
            [sys.executable, __file__, "--tag", str(examples), "--into", str(into)],
            env={**env, "PYTHONPATH": str(src)})
    try:
        for side, child in children.items():
            if child.wait() != 0:
                raise SystemExit(f"the {side} side failed ({child.returncode})")
    finally:  # a side that failed leaves no other running
        for child in children.values():
            if child.poll() is None:
                child.kill()
                child.wait()
    return {side: {row["id"]: row for row in map(json.loads, (work / f"{side}.jsonl").open())}
            for side in children}


# --- the comparisons ---------------------------------------------------------------------

def decision(ids: Sequence[str], sets: Mapping[str, str], gold: Mapping[str, bool],
             new: Mapping[str, bool], old: Mapping[str, bool], draws: int) -> dict[str, Any]:
    """New (candidate) against old (current) on ``ids`` by the rule, with the safety rule."""
    from conli.evaluation.rule import Paired, decide

    paired = {name: Paired([gold[i] for i in mine], [float(new[i]) for i in mine],
                           [float(old[i]) for i in mine])
              for name in sorted({sets[i] for i in ids})
              for mine in [[i for i in ids if sets[i] == name]]}
    made = decide(paired, "bacc", draws=draws)
    moved: dict[str, Counter[str]] = {name: Counter() for name in [*paired, "all"]}
    for i in ids:
        if new[i] != old[i]:
            how = f"now {'flagged' if new[i] else 'passed'}, " \
                  f"{'hallucinated' if gold[i] else 'faithful'}"
            moved[sets[i]][how] += 1
            moved["all"][how] += 1
    return {**made.as_dict(), "holds": made.holds,
            "changed": {k: dict(v) for k, v in moved.items()}}


def example_of(i: str, sets: Mapping[str, str], gold: Mapping[str, bool],
               sides: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One changed example: its gold label and each side's flagged sentences and reasons."""
    new = sides["new"][i]
    kept = {f["index"] for f in new["flagged"]}
    causes = sorted({f"sentence {f['index']}: " + (
        f"its names not compared (read as {new['skipped'][str(f['index'])]})"
        if str(f["index"]) in new["skipped"] else "found stated by the new comparison")
        for f in sides["old"][i]["flagged"] if f["index"] not in kept})
    return {"id": i, "dataset": sets[i], "hallucinated": gold[i], "why": causes,
            **{f"{side} flags": [{"sentence": f["index"], "text": f["text"][:300],
                                  "reasons": [r[:300] for r in f["reasons"]]}
                                 for f in sides[side][i]["flagged"]] for side in ("old", "new")}}


def addressing(sides: Mapping[str, Mapping[str, Any]], sets: Mapping[str, str]
               ) -> dict[str, Any]:
    """The word list's part, each side, on the dev sets and the injection cases.

    Where it found anything (a note naming a source, text withheld from the models, a flag
    for speaking to the checker) the example ran again with it finding nothing (``tag``).
    """
    out: dict[str, Any] = {}
    for side, rows in sides.items():
        for corpus in ("dev sets", "injection cases"):
            mine = [r for i, r in rows.items() if (sets[i] == CASES) == (corpus != "dev sets")]
            found = [r for r in mine if "flagged without the word list" in r]
            out[f"{side}, {corpus}"] = {
                "examples": len(mine),
                "a note names a source": sum(bool(r["named"]) for r in mine),
                "text withheld from the models": sum(bool(r.get("withheld")) for r in mine),
                "sentences flagged for speaking to the checker": sum(
                    "addresses_checker" in f["rules"] for r in mine for f in r["flagged"]),
                "verdicts it changed": sum(
                    bool(r["flagged"]) != bool(r["flagged without the word list"])
                    for r in found),
                "examples whose flagged sentences it changed": sum(
                    sorted(f["index"] for f in r["flagged"])
                    != sorted(r["flagged without the word list"]) for r in found)}
    return out


def compare(args: argparse.Namespace, sides: Mapping[str, Mapping[str, Any]],
            examples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The three comparisons, their changed examples and the checks."""
    from conli.evaluation.detection import Outcome, read_predictions
    from conli.evaluation.one_token import rule_flags
    from conli.evaluation.paired import trained_on
    from conli.signals.model import FUSED_ARTIFACT, load_model
    from conli.training.data import read_rows
    from conli.training.train import response_score

    dev = [e for e in examples if e["dataset"] != CASES]
    sets = {e["id"]: e["dataset"] for e in examples}
    gold = {e["id"]: bool(e["label"]) for e in dev}
    layer = {side: {i: bool(row["flagged"]) for i, row in rows.items()}
             for side, rows in sides.items()}
    model = load_model(FUSED_ARTIFACT)
    _, rows = read_rows(args.features)
    fused = {r.example_id: response_score(model, r) >= model.threshold for r in rows}
    trained = trained_on(model, args.data_dir)
    stored = [r.example_id for r in rows]
    held = [i for i in stored if i not in trained]
    combined = {side: {i: fused[i] or flags[i] for i in stored}
                for side, flags in layer.items()}
    scopes = {
        "held out: fused.v1 + the layer on the 509 fused.v1 never saw": (held, combined),
        "not held out: fused.v1 + the layer on all 800 stored (291 trained on)": (stored, combined),
        "the layer alone: every example of the 8 dev sets": ([e["id"] for e in dev], layer)}
    report: dict[str, Any] = {}
    for name, (ids, flags) in scopes.items():
        found = decision(ids, sets, gold, flags["new"], flags["old"], args.draws)
        changed = [i for i in ids if flags["new"][i] != flags["old"][i]]
        found["examples"] = {
            direction: [example_of(i, sets, gold, sides) for i in changed
                        if flags["new"][i] == (direction == "now flagged")]
            for direction in ("now flagged", "now passed")}
        report[name] = found
    outcomes = list(read_predictions(args.baseline / "predictions.jsonl.gz", Outcome.from_json))
    recorded = rule_flags(outcomes)
    stated = json.loads((args.baseline / "decision.json").read_text(encoding="utf-8"))
    current = next(iter(stated["decisions"].values()))["per_set"]
    old_held = report[next(iter(scopes))]["per_set"]
    mine = {side: [tagged[e["id"]] for e in dev] for side, tagged in sides.items()}
    checks = {
        "held-out ids are the baseline run's": set(held) == {o.example_id for o in outcomes},
        "old flags agree with the baseline run's stored rule, of": [
            sum(layer["old"][i] == f for i, f in recorded.items()), len(recorded)],
        "new flags agree with the baseline run's stored rule, of": [
            sum(layer["new"][i] == f for i, f in recorded.items()), len(recorded)],
        "old side's held-out BAcc is the baseline decision's fused.v1 + rule": all(
            abs(old_held[s]["current"] - current[s]["current"]) < 1e-12 for s in current),
        "sentences checked by each side": {side: sum(r["checked"] for r in rs)
                                           for side, rs in mine.items()},
        "sentences flagged by each side": {side: sum(len(r["flagged"]) for r in rs)
                                           for side, rs in mine.items()},
        "responses whose claims were read in a language other than English": {
            side: {r["id"]: r["language"] for r in rs if r["language"] != "en"}
            for side, rs in mine.items()},
        "sentences whose names were not compared (the language each was read in)": {
            side: {f"{r['id']} s{k}": v for r in rs for k, v in r["skipped"].items()}
            for side, rs in mine.items()},
        "the word list": addressing(sides, sets),
    }
    return {"comparisons": report, "checks": checks}


# --- the report --------------------------------------------------------------------------

def pct(value: float) -> str:
    """A 0-1 figure in percent."""
    return f"{100 * value:.1f}"


def gain(g: Mapping[str, float]) -> str:
    """A paired difference in points with its interval."""
    return f"{100 * g['gain']:+.1f} [{100 * g['low']:+.1f}, {100 * g['high']:+.1f}]"


def means(found: Mapping[str, Any]) -> str:
    """The mean of sets' BAcc, old then new, as two table cells."""
    rows = found["per_set"].values()
    return " | ".join(pct(sum(r[k] for r in rows) / len(rows)) for k in ("current", "candidate"))


def moved(counts: Mapping[str, int]) -> str:
    """Changed verdicts: now flagged (faithful / hallucinated), now passed (the same)."""
    f, h = (counts.get(f"now flagged, {g}", 0) for g in ("faithful", "hallucinated"))
    pf, ph = (counts.get(f"now passed, {g}", 0) for g in ("faithful", "hallucinated"))
    return f"{f + h + pf + ph}: +{f + h} flagged ({f} F / {h} H), -{pf + ph} passed " \
           f"({pf} F / {ph} H)"


def scope_table(found: Mapping[str, Any]) -> list[str]:
    """One comparison per set, then the mean of sets, and what the rules say."""
    lines = ["| set | n (hallucinated) | BAcc old | BAcc new | new - old [95% interval] "
             "| verdicts changed |", "|---|---|---|---|---|---|"]
    for name, row in found["per_set"].items():
        lines.append(f"| {name} | {row['n']} ({row['hallucinated']}) | {pct(row['current'])} "
                     f"| {pct(row['candidate'])} | {gain(row)} "
                     f"| {moved(found['changed'].get(name, {}))} |")
    lines.append(f"| mean of sets | | {means(found)} | **{gain(found['mean'])}** "
                 f"| {moved(found['changed']['all'])} |")
    losses = ", ".join(found["losses"]) or "none"
    lines += ["", f"Safety rule (mean interval reaches zero or above, point no worse than -1, "
              f"no set wholly below zero): **{'holds' if found['holds'] else 'fails'}**; "
              f"sets wholly below zero: {losses}."]
    return lines


def shown(example: Mapping[str, Any]) -> str:
    """One changed example in a line: each side's flagged sentences and reasons."""
    def side(name: str) -> str:
        flags = example[f"{name} flags"]
        return "; ".join(f"s{f['sentence']} \"{f['text'][:120]}\": {' / '.join(f['reasons'])}"
                         for f in flags) or "nothing"
    gold = "hallucinated" if example["hallucinated"] else "faithful"
    return (f"- `{example['id']}` ({gold}). Old flags {side('old')}. "
            f"New flags {side('new')}. Why: {'; '.join(example['why']) or '-'}.")


def markdown(result: Mapping[str, Any], changed: Mapping[str, Any]) -> str:
    """The report: a summary of the three comparisons, each per set, examples, checks."""
    p = result["provenance"]
    out = ["# Issue 61 by the safety rule: the deterministic layer before and after "
           "(stored readings, no model call)", "",
           f"- command: `{p['command']}`",
           f"- new: `{p['git_commit']}`{' (dirty working tree)' if p['git_dirty'] else ''}; "
           f"old: `{p['old_commit']}` (`git archive` of its `src`)",
           f"- fused.v1's readings: `{p['features']}`; threshold {p['threshold']:.4f}",
           "- a response is flagged by fused.v1 + the layer when fused.v1 flags it or the "
           "layer flags one of its checked sentences (`one_token.decide_one_token`)",
           f"- rule: `conli.evaluation.rule.decide(metric=\"bacc\", draws={p['draws']})`, "
           "new (candidate) - old (current); F / H: gold faithful / hallucinated", "",
           "## Summary", "",
           "| comparison | mean BAcc old | mean BAcc new | new - old [95%] | sets wholly "
           "below zero | verdicts changed | safety rule |", "|---|---|---|---|---|---|---|"]
    for name, found in result["comparisons"].items():
        out.append(f"| {name} | {means(found)} "
                   f"| {gain(found['mean'])} | {', '.join(found['losses']) or 'none'} "
                   f"| {moved(found['changed']['all'])} "
                   f"| {'holds' if found['holds'] else 'fails'} |")
    for name, found in result["comparisons"].items():
        out += ["", f"## {name}", "", *scope_table(found)]
        for direction, examples in changed[name].items():
            if examples:
                why = Counter(w.split(": ", 1)[1].split(" (read as")[0]
                              for e in examples for w in e["why"])
                out += ["", f"{direction} ({len(examples)} examples; their sentences: "
                        + ", ".join(f"{n} {cause}" for cause, n in why.most_common())
                        + f"); the first {SHOWN} of changes.jsonl:", "",
                        *(shown(e) for e in examples[:SHOWN])]
    out += ["", "## Checks", "", "```json", json.dumps(result["checks"], indent=1,
                                                        ensure_ascii=False), "```", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Tag both sides, compare them by the rule, write the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", default="c4c8e8c", help="the commit of the layer before")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--features", type=Path,
                        default=Path("benchmarks/data/features/dev.jsonl"))
    parser.add_argument("--baseline", type=Path,
                        default=Path("benchmarks/results/yesno-heldout"),
                        help="a stored run on the 509 held out, with decide_one_token's decision")
    parser.add_argument("--cases", type=Path,
                        default=Path("benchmarks/data/injection/cases.jsonl"),
                        help="text the word list finds: where its part in a verdict is checked")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tag", type=Path, help=argparse.SUPPRESS)  # a child's examples
    parser.add_argument("--into", type=Path, help=argparse.SUPPRESS)  # and where it writes
    args = parser.parse_args(argv)
    if args.tag:
        tag(args.tag, args.into)
        return 0
    if args.out is None:
        parser.error("--out is required")
    argv = sys.argv[1:] if argv is None else argv
    from conli.evaluation.loaders import DATASETS, load_dataset
    from conli.evaluation.report import git_state, publish
    from conli.signals.model import FUSED_ARTIFACT, load_model

    commit, dirty = git_state()
    old = subprocess.run(["git", "rev-parse", args.old], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    examples = [{"id": e.id, "dataset": name, "label": e.label, "source": e.source,
                 "response": e.response, "question": e.question}
                for name in DATASETS for e in load_dataset(name, args.data_dir)]
    cases = [json.loads(line) for line in args.cases.open(encoding="utf-8")]
    examples += [{"id": f"{CASES}:{c['id']}", "dataset": CASES, "label": None,
                  "source": c["source"], "response": c["response"],
                  "question": c.get("question")} for c in cases]
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "examples.jsonl"
        path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in examples),
                        encoding="utf-8")
        sides = run_sides(path, old, Path(work))
    result = {"provenance": {"command": " ".join(["python", SCRIPT, *argv]),
                             "git_commit": commit, "git_dirty": dirty, "old_commit": old,
                             "features": str(args.features), "baseline": str(args.baseline),
                             "cases": str(args.cases),
                             "data_dir": str(args.data_dir), "draws": args.draws,
                             "threshold": load_model(FUSED_ARTIFACT).threshold},
              **compare(args, sides, examples)}
    changed = {name: found.pop("examples") for name, found in result["comparisons"].items()}
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "changes.jsonl").open("w", encoding="utf-8") as out:
        for name, directions in changed.items():
            for direction, examples in directions.items():
                out.writelines(json.dumps({"comparison": name.split(":")[0],
                                           "direction": direction, **e},
                                          ensure_ascii=False) + "\n" for e in examples)
    # the table lists the changed examples; results.json keeps the figures and checks only
    return publish(args.out, result, markdown(result, changed))


if __name__ == "__main__":
    sys.exit(main())

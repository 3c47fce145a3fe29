"""Issue 64.2: the swap rule (``conli.ner.swaps``) against what ships, held out; no model call.

    python benchmarks/experiments/issue-51-defences/swap_rule.py \\
        --heldout benchmarks/results/yesno-heldout/predictions.jsonl.gz \\
        --features benchmarks/data/features/dev.jsonl \\
        --error-types benchmarks/data/error-types \\
        --error-run benchmarks/results/error-types-fused/predictions.jsonl.gz \\
        --data-dir ../shared/data --bipia /tmp/defences/bipia --out benchmarks/results/swap-rule

The rule flags a sentence that has two of its numbers, or two of its names, in each
other's places (the source states both, attached the other way round). It has no fitted
parameter, so nothing is left out for it. Four measurements:

- **the rule's decision** on the 509 dev examples fused.v1 never saw: the current default
  is fused.v1 with the unstated-entity rule, rebuilt as ``one_token.decide_one_token``
  rebuilds it (fused.v1's stored features, the rule read from the held-out run's recorded
  entities); the candidate flags an example the default flags or the swap rule fires on
  (any checked sentence of the held-out run); ``rule.decide`` on balanced accuracy;
- **recall by error type**: the planted errors and their controls, the stored fused run
  OR the rule, caught and false alarms by type;
- **faithful dev answers**: every dev example, each checked sentence (the product's
  splitter) against its source: the share of faithful and of hallucinated responses it
  flags (descriptive: no default is compared);
- **benign corpora** (the over-firing run's: stdlib docstrings, BIPIA emails and tables,
  conli's docs, the benign corpus): a faithful answer of one sentence copied from its
  document, sampled evenly; every one flagged is a false alarm.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# the over-firing run's corpus readers, from the script beside this one (run as a script,
# its folder is on the path)
from addressing_dev import bipia_contexts, stdlib_docstrings

from conli.evaluation.decision_options import decision_parser
from conli.evaluation.detection import Outcome, predictions_digest, read_predictions
from conli.evaluation.loaders import DATASETS, load_dataset, load_file
from conli.evaluation.one_token import paired_decision, rule_flags, scored
from conli.evaluation.report import git_state, publish
from conli.ner.swaps import swaps_of
from conli.signals.model import FUSED_ARTIFACT, load_model
from conli.text.language import stop_words
from conli.text.nlp import load_pipeline
from conli.text.segment import select_claims, sentence_spans, split_response
from conli.training.data import read_rows
from conli.training.train import response_score

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout
STOP = stop_words("en")  # the dev sets, the error types and the corpora read as English
TYPES = ("number", "name", "date", "negation", "antonym", "reversed_role", "swapped_numbers",
         "addition")


def fires(sentences: Iterable[str], source: str) -> list[dict[str, str]]:
    """The swap rule on each sentence: the sentences it flags, with its reason."""
    reader = swaps_of(source, STOP)
    return [{"sentence": s, "reason": found.reason} for s in sentences
            if (found := reader.swap(s)) is not None]


def checked(result: Any) -> list[str]:
    """The texts of a stored result's checked sentences."""
    return [s.text for s in result.sentences if s.checked]


def claims(response: str) -> list[str]:
    """A response's checked sentences as the product cuts them."""
    return [s.text for s in select_claims(split_response(response, load_pipeline()))
            if s.checked]


# --- the decision --------------------------------------------------------------------------

def decision(heldout: Path, features: Path, data_dir: Path, draws: int) -> dict[str, Any]:
    """fused.v1 + unstated rule vs the same OR the swap rule, on the held-out examples."""
    outcomes = list(read_predictions(heldout, Outcome.from_json))
    rows = scored(outcomes, "yesno")  # for ids, sets and labels only
    unstated = rule_flags(outcomes)
    model = load_model(FUSED_ARTIFACT)
    ids = {r.example_id for r in rows}
    _, features_rows = read_rows(features)
    current = {r.example_id: float(response_score(model, r) >= model.threshold
                                   or unstated.get(r.example_id, False))
               for r in features_rows if r.example_id in ids}
    sources = {e.id: e for name in DATASETS for e in load_dataset(name, data_dir)
               if e.id in ids}
    fired, cut_here = {}, 0
    for o in outcomes:
        if o.result is not None:
            sentences = checked(o.result)
        else:
            sentences, cut_here = claims(sources[o.example_id].response), cut_here + 1
        found = fires(sentences, sources[o.example_id].source)
        if found:
            fired[o.example_id] = found
    candidate = {i: max(v, float(i in fired)) for i, v in current.items()}
    decided = paired_decision(rows, candidate, current) if draws == 2000 else None
    if decided is None:  # fewer draws: a quick look, not the rule's own figure
        from conli.evaluation.rule import Paired, decide

        sets = {d: Paired([r.gold for r in mine], [candidate[r.example_id] for r in mine],
                          [current[r.example_id] for r in mine])
                for d in sorted({r.dataset for r in rows})
                for mine in [[r for r in rows if r.dataset == d and r.example_id in current]]}
        decided = decide(sets, "bacc", draws=draws)
    gold = {r.example_id: r.gold for r in rows}
    moved = Counter(f"{'hallucinated' if gold[i] else 'faithful'}, default "
                    f"{'flags' if current.get(i) else 'passes'}" for i in fired)
    return {"n": len(rows), "split_here": cut_here, "decision": decided,
            "fired": {i: {"dataset": sources[i].dataset, "gold": gold[i],
                          "default_flags": bool(current.get(i)), "sentences": f}
                      for i, f in fired.items()},
            "fired_by": dict(sorted(moved.items()))}


# --- errors by type -------------------------------------------------------------------------

def by_type(folder: Path, run: Path) -> dict[str, Any]:
    """Planted errors caught and controls flagged, fused alone and fused OR the rule."""
    stored = {o.example_id: o for o in read_predictions(run, Outcome.from_json)}
    out: dict[str, Any] = {}
    for kind in TYPES:
        counts: Counter[str] = Counter()
        fired = []
        for example in load_file(folder / f"{kind}.jsonl"):
            o = stored[example.id]
            before = o.predicted == "hallucinated"
            found = fires(checked(o.result) if o.result else [example.response],
                          example.source)
            side = "error" if example.label else "control"
            counts[side] += 1
            counts[f"{side} fused"] += before
            counts[f"{side} rule"] += bool(found)
            counts[f"{side} fused or rule"] += before or bool(found)
            fired += [{"id": example.id, **f} for f in found]
        out[kind] = {**counts, "fired": fired}
    return out


# --- faithful text ---------------------------------------------------------------------------

def dev_answers(data_dir: Path) -> dict[str, Any]:
    """Every dev example's checked sentences: responses flagged, faithful and hallucinated."""
    out: dict[str, Any] = {}
    for name in DATASETS:
        counts: Counter[str] = Counter()
        faithful = []
        for example in load_dataset(name, data_dir):
            side = "hallucinated" if example.label else "faithful"
            found = fires(claims(example.response), example.source)
            counts[side] += 1
            counts[f"{side} flagged"] += bool(found)
            if found and not example.label:
                faithful += [{"id": example.id, **f} for f in found]
        out[name] = {**counts, "faithful_fired": faithful}
    return out


def corpora(bipia: Path | None) -> dict[str, Iterable[str]]:
    """The over-firing run's benign corpora, by name (BIPIA only where its checkout is)."""
    found: dict[str, Iterable[str]] = {"python stdlib docstrings": stdlib_docstrings()}
    if bipia is not None and (bipia / "benchmark").is_dir():
        for task in ("email", "table"):
            found[f"BIPIA {task}s"] = list(bipia_contexts(bipia, task))
    found["conli docs"] = (p.read_text(encoding="utf-8") for p in
                           [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    benign = ROOT / "benchmarks" / "data" / "injection" / "benign.jsonl"
    found["benign corpus (issue 61)"] = (json.loads(line)["text"] for line in
                                         benign.read_text(encoding="utf-8").splitlines()
                                         if line.strip())
    return found


def copied(documents: Iterable[str], most: int) -> dict[str, Any]:
    """One sentence copied from its document as the answer, sampled evenly: how many fire."""
    pairs = [(text, text[a:b].strip()) for text in documents
             for a, b in sentence_spans(text, paragraphs=True) if text[a:b].strip()]
    step = max(1, len(pairs) // most)
    sample = pairs[::step][:most]
    flagged = [f for source, answer in sample for f in fires([answer], source)]
    return {"sentences": len(pairs), "checked": len(sample), "flagged": len(flagged),
            "examples": flagged[:10]}


# --- the report ------------------------------------------------------------------------------

def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "–"


def caught(c: Counter[str], side: str) -> list[str]:
    """A planted-errors cell group: fused's catches, the rule's, fused OR the rule's."""
    return [f"{c[f'{side} fused']}/{c[side]}", str(c[f"{side} rule"]),
            f"{c[f'{side} fused or rule']}/{c[side]}"]


def flagged(c: Counter[str], side: str) -> list[str]:
    """A dev-answers cell group: the responses, how many the rule flags, and their share."""
    return [f"{c[side]:,}", str(c[f"{side} flagged"]), pct(c[f"{side} flagged"], c[side])]


def tally(counts: Mapping[str, Mapping[str, Any]], sides: Sequence[str],
          cells: Callable[[Counter[str], str], list[str]]) -> list[str]:
    """A table's rows of counts, one a group and a last one of their sums (**all**).

    Each row is the group's name, then ``cells`` of its counts for each side in turn; a
    count the group lacks is 0, and only whole numbers are summed (not its examples).
    """
    def row(name: str, c: Counter[str]) -> str:
        return " | ".join([f"| {name}", *[x for side in sides for x in cells(c, side)]]) + " |"

    total: Counter[str] = Counter()
    rows = []
    for name, found in counts.items():
        c = Counter({k: v for k, v in found.items() if isinstance(v, int)})
        total.update(c)
        rows.append(row(name, c))
    return [*rows, row("**all**", total)]


def markdown(result: Mapping[str, Any]) -> str:
    p, d = result["provenance"], result["decision"]
    lines = ["# Issue 64.2: the swap rule against what ships (stored runs, no model call)", "",
             f"- command: `{p['command']}`",
             f"- commit: `{p['git_commit']}`{' (dirty working tree)' if p['git_dirty'] else ''}",
             f"- held-out run: `{p['heldout']}` (sha256 `{p['heldout_sha256'][:16]}…`); "
             f"{d['n']} examples, {d['split_here']} cut here (no stored result)",
             "- current default: fused.v1 + the unstated-entity rule (as "
             "`one_token.decide_one_token` builds it); candidate: the same OR the swap rule",
             "", "## The decision (balanced accuracy, held out)", "",
             d["table"], "",
             "Examples the rule fires on: " + (", ".join(
                 f"{n} {k}" for k, n in d["fired_by"].items()) or "none") + ".", ""]
    for i, f in d["fired"].items():
        for s in f["sentences"]:
            lines.append(f"- {i} ({'hallucinated' if f['gold'] else 'faithful'}; default "
                         f"{'flags' if f['default_flags'] else 'passes'}): {s['reason']}")
    lines += ["", "## Planted errors by type (fused's stored run, then OR the rule)", "",
              "| type | errors caught: fused | by the rule | fused OR rule | controls "
              "flagged: fused | by the rule | fused OR rule |", "|---|---|---|---|---|---|---|",
              *tally(result["by_type"], ("error", "control"), caught)]
    lines += ["", "## Faithful dev answers (every dev example, the product's sentences)", "",
              "| set | faithful responses | flagged | share | hallucinated responses | flagged "
              "| share |", "|---|---|---|---|---|---|---|",
              *tally(result["dev"], ("faithful", "hallucinated"), flagged)]
    lines += ["", "Faithful dev responses it flags:", ""]
    lines += [f"- {f['id']}: {f['reason']}" for c in result["dev"].values()
              for f in c["faithful_fired"]]
    lines += ["", "## Benign corpora (one sentence copied from its document)", "",
              "| corpus | sentences | answers checked | flagged |", "|---|---|---|---|"]
    lines += [f"| {name} | {c['sentences']:,} | {c['checked']:,} | {c['flagged']} |"
              for name, c in result["benign"].items()]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = decision_parser(__doc__.splitlines()[0])
    parser.add_argument("--heldout", type=Path, required=True,
                        help="a detect run on the 509 held-out examples (predictions)")
    parser.add_argument("--features", type=Path, required=True,
                        help="the dev features fused.v1 decides on")
    parser.add_argument("--error-types", type=Path, required=True,
                        help="the folder of planted errors, one file a type")
    parser.add_argument("--error-run", type=Path, required=True,
                        help="fused's stored run on the planted errors (predictions)")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--bipia", type=Path, help="a checkout of microsoft/BIPIA")
    parser.add_argument("--benign", type=int, default=1000,
                        help="copied answers checked per benign corpus, sampled evenly")
    args = parser.parse_args(argv)
    commit, dirty = git_state()
    decided = decision(args.heldout, args.features, args.data_dir, args.draws)
    table = decided["decision"].table("fused.v1 + rules + swap rule", "fused.v1 + rule")
    result: dict[str, Any] = {
        "provenance": {"command": " ".join(["python", SCRIPT, *(
            sys.argv[1:] if argv is None else argv)]), "git_commit": commit,
            "git_dirty": dirty, "heldout": str(args.heldout),
            "heldout_sha256": predictions_digest(args.heldout), "draws": args.draws},
        "decision": {**{k: v for k, v in decided.items() if k != "decision"},
                     "rule": decided["decision"].as_dict(), "table": table},
        "by_type": by_type(args.error_types, args.error_run),
        "dev": dev_answers(args.data_dir),
        "benign": {name: copied(docs, args.benign)
                   for name, docs in corpora(args.bipia).items()}}
    return publish(args.out, result, markdown(result))


if __name__ == "__main__":
    sys.exit(main())

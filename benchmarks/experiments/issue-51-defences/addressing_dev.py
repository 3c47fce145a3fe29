"""Issue 61: how often do the deterministic defences fire on real, benign text?

    python benchmarks/experiments/issue-51-defences/addressing_dev.py \
        --data-dir ../shared/data --bipia ../BIPIA --out benchmarks/results/overfiring

No model call. For each corpus of ordinary text, two figures:

- **sentences named**: the share of its sentences that the notes' patterns
  (``conli.text.addressing``) name as addressed to the checker: what an operator would be
  shown as a suspicious chunk (a note; no verdict rests on it);
- **faithful answers flagged**: a response that copies one of its sentences word for word,
  checked against its document by the rules no model can move (the unstated names,
  numbers and dates, read in the claim's own language as ``graph.grounding.ground`` reads
  them, with the default spaCy NER). Every one flagged is a false alarm.

Corpora: the dev sets (every source; faithful answers sampled evenly), the docstrings of
the Python standard library on this machine (``ast``), BIPIA's emails and tables (a
checkout of microsoft/BIPIA: ``--bipia``; its abstracts are XSum articles its script
downloads, which the dev sets' XSum sources stand for), conli's own docs, and
``benchmarks/data/injection/benign.jsonl`` (forms, affidavits, reviews, legal notices, news about AI
rules, docstrings, in eight languages). A corpus whose files are missing is left out and
the table says so.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import sysconfig
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from conli.config import Settings
from conli.evaluation.loaders import DATASETS, load_dataset
from conli.evaluation.report import git_state, publish
from conli.ner.claims import claim_entities
from conli.ner.grounding import mentions_of
from conli.ner.spacy_ner import SpacyRecognizer
from conli.text.addressing import addressed
from conli.text.language import claims_language, language_of_claim
from conli.text.nlp import load_pipeline
from conli.text.segment import sentence_spans

ROOT = Path(__file__).resolve().parents[3]
BENIGN = ROOT / "benchmarks" / "data" / "injection" / "benign.jsonl"
SCRIPT = "/".join(Path(__file__).resolve().parts[-4:])  # as run from the checkout
Document = str  # one source: a docstring, an email, a page


def sentences_of(text: str) -> list[tuple[int, int]]:
    """The document's sentences (by rules, in its own language), blank ones left out."""
    language = claims_language("auto", text, text)
    return [(a, b) for a, b in sentence_spans(text, paragraphs=True, language=language)
            if text[a:b].strip()]


def named(text: str, spans: list[tuple[int, int]]) -> list[int]:
    """The indexes of the sentences an addressed span overlaps."""
    found = addressed(text)
    return [i for i, (a, b) in enumerate(spans) if any(s.start < b and a < s.end for s in found)]


class Rules:
    """The deterministic rules a faithful answer meets: unstated names, numbers and dates."""

    def __init__(self) -> None:
        settings = Settings(_env_file=None)  # type: ignore[call-arg]
        self.ner = SpacyRecognizer(load_pipeline(), settings.entity_categories)

    def flags(self, source: str, answer: str) -> list[str]:
        """What the rules would flag in ``answer`` checked against ``source`` (empty: nothing)."""
        language = language_of_claim(answer, "auto", claims_language("auto", answer, source))
        claim = claim_entities(answer, self.ner, "spacy", language)
        return [e.text for e in mentions_of(source).unstated(claim.entities)]


def measure(documents: Iterable[Document], rules: Rules, faithful: int) -> dict[str, Any]:
    """Sentences named and faithful answers flagged over one corpus (``faithful``: the cap)."""
    counts = {"documents": 0, "sentences": 0, "named": 0}
    pairs: list[tuple[str, str]] = []
    examples: list[str] = []
    for text in documents:
        spans = sentences_of(text)
        counts["documents"] += 1
        counts["sentences"] += len(spans)
        hit = named(text, spans)
        counts["named"] += len(hit)
        examples += [text[spans[i][0]:spans[i][1]].strip()[:160] for i in hit]
        pairs += [(text, text[a:b].strip()) for a, b in spans]
    step = max(1, len(pairs) // faithful) if faithful else len(pairs) + 1
    checked = pairs[::step][:faithful]
    flagged = [(answer, words) for source, answer in checked
               if (words := rules.flags(source, answer))]
    return {**counts, "named_share": counts["named"] / max(1, counts["sentences"]),
            "named_examples": examples[:20], "faithful_checked": len(checked),
            "faithful_flagged": len(flagged),
            "flagged_examples": [{"answer": a[:160], "unstated": w} for a, w in flagged[:20]]}


# --- the corpora ------------------------------------------------------------------------------


def dev_sources(data_dir: Path, name: str) -> Iterator[Document]:
    """Each distinct source of one dev set."""
    seen: set[str] = set()
    for example in load_dataset(name, data_dir):
        if example.source not in seen:
            seen.add(example.source)
            yield example.source


STDLIB = Path(sysconfig.get_paths()["stdlib"])


def stdlib_docstrings(paths: Iterable[Path] | None = None) -> Iterator[Document]:
    """Every module, class and function docstring of the standard library (tests left out)."""
    for path in sorted(paths if paths is not None else STDLIB.rglob("*.py")):
        parts = set(path.relative_to(STDLIB).parts) if path.is_relative_to(STDLIB) else set()
        if parts & {"test", "tests", "site-packages", "idle_test", "__pycache__"}:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef |
                          ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and doc.strip():
                    yield doc


def bipia_contexts(checkout: Path, task: str) -> Iterator[Document]:
    """The benign contexts (no attack inserted) of a BIPIA task: ``email`` or ``table``."""
    for split in ("train", "test"):
        path = checkout / "benchmark" / task / f"{split}.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield json.loads(line)["context"]


def conli_docs() -> Iterator[Document]:
    """conli's own pages: README and docs/*.md, one page each."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        yield path.read_text(encoding="utf-8")


def benign(path: Path = BENIGN) -> Iterator[Document]:
    """The hand-written benign corpus (issue 61's kinds of prose)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)["text"]


def corpora(args: argparse.Namespace) -> dict[str, Callable[[], Iterable[Document]]]:
    """Each corpus by name, as a function that reads it (missing files: left out)."""
    found: dict[str, Callable[[], Iterable[Document]]] = {}
    for name, (file, _) in DATASETS.items():
        if (args.data_dir / file).exists():
            found[f"dev: {name}"] = lambda name=name: dev_sources(args.data_dir, name)
    found["python stdlib docstrings"] = stdlib_docstrings
    if args.bipia and (args.bipia / "benchmark").is_dir():
        for task in ("email", "table"):
            found[f"BIPIA {task}s"] = lambda task=task: bipia_contexts(args.bipia, task)
    found["conli docs"] = conli_docs
    found["benign corpus (issue 61)"] = benign
    return found


def markdown(result: dict[str, Any]) -> str:
    """The table: per corpus, sentences named and faithful answers flagged."""
    lines = ["# Over-firing of the deterministic defences on benign text (issue 61)", "",
             f"- command: `{result['command']}`", f"- commit: `{result['commit']}`", "",
             "| corpus | documents | sentences | named by the notes' patterns | share | "
             "faithful answers checked | flagged by a rule |", "|---|---|---|---|---|---|---|"]
    for name, r in result["corpora"].items():
        lines.append(f"| {name} | {r['documents']:,} | {r['sentences']:,} | {r['named']:,} | "
                     f"{100 * r['named_share']:.2f}% | {r['faithful_checked']:,} | "
                     f"{r['faithful_flagged']} |")
    if result["missing"]:
        lines += ["", f"Left out (files missing): {', '.join(result['missing'])}."]
    for name, r in result["corpora"].items():
        if r["named_examples"] or r["flagged_examples"]:
            lines += ["", f"## {name}", ""]
            lines += [f"- named: {text!r}" for text in r["named_examples"]]
            lines += [f"- flagged: {f['answer']!r} (unstated: {', '.join(f['unstated'])})"
                      for f in r["flagged_examples"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--bipia", type=Path, help="a checkout of microsoft/BIPIA")
    parser.add_argument("--faithful", type=int, default=1000,
                        help="faithful answers checked per corpus, sampled evenly")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    commit, dirty = git_state()
    rules = Rules()
    found = corpora(args)
    expected = [f"dev: {name}" for name in DATASETS] + ["BIPIA emails", "BIPIA tables"]
    result = {"command": " ".join(["python", SCRIPT,
                                   *(sys.argv[1:] if argv is None else argv)]),
              "commit": f"{commit}{'+dirty' if dirty else ''}",
              "corpora": {name: measure(read(), rules, args.faithful)
                          for name, read in found.items()},
              "missing": [name for name in expected if name not in found]}
    return publish(args.out, result, markdown(result))


if __name__ == "__main__":
    sys.exit(main())

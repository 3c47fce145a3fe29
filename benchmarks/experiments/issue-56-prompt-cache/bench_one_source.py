"""N candidate texts against one source: one ``conli judge`` run of them all against N single runs.

    python benchmarks/experiments/issue-56-prompt-cache/bench_one_source.py \\
        --llm local --n 20 --seed 0 --out benchmarks/results/one-source

Issue 56.3: a 20-text audit against one source should read the source once, not 20 times.

- **shared**: one ``conli judge --source S --response C1 ... --response CN`` (in this process,
  through the CLI): one checker judges the candidates in turn, so the model's prompt cache
  keeps the source from one candidate to the next.
- **single**: N runs of ``conli judge --source S --response Ci``, each building its own checker
  and backend as a new process would (the embedded model loaded again, with an empty prompt
  cache but for the static prefix's saved state, which a new process restores too).

The source is one HaluEval summarization document (``--data-dir``'s
``halueval/summarization_dev_500.jsonl``; the document at ``--doc``, else one drawn with
``--seed`` among those of at most ``--max-source-chars`` characters that give ``--n``
candidates). The candidates: its right summary, its hallucinated summary, then every other
run of consecutive sentences of either (a shorter summary, faithful or not), without
repeats, in an order drawn with ``--seed``; the first ``--n``. Deterministic for a seed.

A warm-up run (the first candidate alone, not counted) first pays what a process pays once
(imports, the sentence parser, the static prefix's saved state). Reported for each arm:
wall seconds (the single runs' sum, the model's loading included, as N processes would pay
it; a real process's start-up is not, so the single arm is if anything low), seconds inside
model calls, calls, prompt tokens prefilled anew and taken from the prompt cache (the
results' ``usage``), generated tokens, and each candidate's score; then shared/single for
wall and model seconds and tokens prefilled anew.
``--layout`` sets ``CONLI_PROMPT_LAYOUT`` (default: as configured); in the ``own`` layout the
judge's reasoning prompt does not open with the source, so it displaces the source from a
one-prompt cache between candidates.
Writes ``one-source.json`` and ``one-source.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conli.cli import app as cli
from conli.evaluation.loaders import load_halueval_summarization
from conli.evaluation.report import git_state
from conli.text.segment import sentence_spans

DATA = "halueval/summarization_dev_500.jsonl"


def spans(summary: str) -> list[str]:
    """Every run of consecutive sentences of ``summary``, the whole of it included."""
    cut = [summary[start:end] for start, end in sentence_spans(summary)]
    return [" ".join(cut[i:j]) for i in range(len(cut)) for j in range(i + 1, len(cut) + 1)]


def candidates(right: str, wrong: str, n: int, rng: random.Random) -> list[str]:
    """The two summaries, then their other sentence runs in a drawn order; ``n`` at most."""
    rest = [text for text in dict.fromkeys(spans(right) + spans(wrong))
            if text not in (right, wrong)]
    rng.shuffle(rest)
    return [right, wrong, *rest][:n]


def pick(data_dir: Path, n: int, seed: int, doc: int | None,
         max_chars: int) -> tuple[int, str, list[str]]:
    """The document's index, its text and its ``n`` candidates (see the module's docstring)."""
    examples = load_halueval_summarization(data_dir / DATA)
    pairs = [(examples[i], examples[i + 1]) for i in range(0, len(examples), 2)]
    rng = random.Random(seed)
    if doc is None:
        eligible = [i for i, (right, wrong) in enumerate(pairs)
                    if len(right.source) <= max_chars
                    and len(candidates(right.response, wrong.response, n, random.Random(0))) >= n]
        if not eligible:
            raise SystemExit(f"no document of at most {max_chars} characters gives {n} candidates")
        doc = rng.choice(eligible)
    right, wrong = pairs[doc]
    chosen = candidates(right.response, wrong.response, n, rng)
    if len(chosen) < n:
        raise SystemExit(f"document {doc} gives {len(chosen)} candidates, not {n}")
    return doc, right.source, chosen


def judge(llm: str, source: Path, texts: list[Path], report: Path) -> tuple[float, list[Any]]:
    """One ``conli judge`` run over ``texts``: its wall seconds and its texts' results."""
    args = ["judge", "--source", str(source), "--llm", llm, "--json", "--output", str(report)]
    for text in texts:
        args += ["--response", str(text)]
    started = time.perf_counter()
    code = cli.main(args)
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"conli judge exited {code}")
    return seconds, json.loads(report.read_text(encoding="utf-8"))["texts"]


def arm(name: str, seconds: float, texts: list[Any]) -> dict[str, Any]:
    """What one arm cost, from its wall time and its results' usage."""
    usage = [text["usage"] for text in texts]
    total = {key: sum(u.get(key) or 0 for u in usage)
             for key in ("calls", "prompt_tokens", "cached_tokens", "completion_tokens")}
    return {"arm": name, "wall_seconds": round(seconds, 2),
            "model_seconds": round(sum(u.get("seconds") or 0.0 for u in usage), 2), **total,
            "prefilled_tokens": total["prompt_tokens"] - total["cached_tokens"],
            "scores": [text["judge"].get("score") for text in texts],
            "statuses": [text["judge"].get("status") for text in texts]}


def table(arms: list[dict[str, Any]]) -> str:
    """The arms as a Markdown table."""
    lines = ["| arm | wall s | model s | calls | prompt tokens | prefilled anew | from cache | "
             "generated |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {a['arm']} | {a['wall_seconds']} | {a['model_seconds']} | {a['calls']} | "
              f"{a['prompt_tokens']:,} | {a['prefilled_tokens']:,} | {a['cached_tokens']:,} | "
              f"{a['completion_tokens']:,} |" for a in arms]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--llm", default="local",
                        help="the backend spec (default local: the embedded model)")
    parser.add_argument("--n", type=int, default=20, help="candidate texts (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="draws the document and the order")
    parser.add_argument("--doc", type=int, help="the document's index in the file instead")
    parser.add_argument("--max-source-chars", type=int, default=3000,
                        help="longest document drawn (default 3000)")
    parser.add_argument("--layout", choices=["own", "shared"],
                        help="CONLI_PROMPT_LAYOUT for both arms (default: as configured)")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/one-source"))
    args = parser.parse_args()
    if args.n < 1:
        parser.error("--n must be at least 1")
    if args.layout:
        os.environ["CONLI_PROMPT_LAYOUT"] = args.layout
    llm = args.llm
    doc, source_text, texts = pick(args.data_dir, args.n, args.seed, args.doc,
                                   args.max_source_chars)
    print(f"document {doc}: {len(source_text):,} characters; {len(texts)} candidates",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="conli-one-source-") as tmp:
        work = Path(tmp)
        source = work / "source.txt"
        source.write_text(source_text, encoding="utf-8")
        paths = []
        for number, text in enumerate(texts):
            paths.append(work / f"candidate{number:02d}.txt")
            paths[-1].write_text(text, encoding="utf-8")
        # what a process pays once whatever it runs (imports, the sentence parser, the
        # static prefix's saved state): paid here, before either arm's clock
        warm_up, _ = judge(llm, source, paths[:1], work / "warm-up.json")
        print(f"  warm-up (not counted): {warm_up:.1f} s", flush=True)
        seconds, shared = judge(llm, source, paths, work / "shared.json")
        print(f"  shared: {seconds:.1f} s", flush=True)
        single_seconds, single = 0.0, []
        for number, path in enumerate(paths):
            took, texts_out = judge(llm, source, [path], work / f"single{number:02d}.json")
            single_seconds += took
            single += texts_out
            print(f"  single {number + 1}/{len(paths)}: {took:.1f} s", flush=True)
    arms = [arm("shared (one run, N candidates)", seconds, shared),
            arm("single (N runs, one candidate each)", single_seconds, single)]
    ratio = {key: round(arms[0][key] / arms[1][key], 3) if arms[1][key] else None
             for key in ("wall_seconds", "model_seconds", "prefilled_tokens")}
    same = sum(a == b for a, b in zip(arms[0]["scores"], arms[1]["scores"], strict=True))
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "git": git_state(),
        "llm": args.llm, "prompt_layout": os.environ.get("CONLI_PROMPT_LAYOUT", "as configured"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_at_start": os.getloadavg()},
        "data": DATA, "doc": doc, "seed": args.seed, "source_chars": len(source_text),
        "candidates": texts, "warm_up_seconds": round(warm_up, 2), "arms": arms,
        "shared_over_single": ratio,
        "same_scores": f"{same}/{len(texts)}",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "one-source.json").write_text(json.dumps(result, indent=2) + "\n",
                                              encoding="utf-8")
    summary = (f"{table(arms)}\n\nshared/single: wall {ratio['wall_seconds']}, model seconds "
               f"{ratio['model_seconds']}, tokens prefilled anew {ratio['prefilled_tokens']}; "
               f"same score for {same} of {len(texts)} candidates\n")
    (args.out / "one-source.md").write_text(summary, encoding="utf-8")
    print(summary, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

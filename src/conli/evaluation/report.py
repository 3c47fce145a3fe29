"""Provenance recorded with every result, and the JSON + Markdown files written per run."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conli.config import Settings
from conli.files import write_atomically
from conli.version import __version__

# Published numbers beside ours (from ../shared/data/README.md). They are on the AggreFact
# FtSota *test* cuts; our rows are on the validation cuts, so compare with care.
PUBLISHED: dict[str, dict[str, float]] = {
    "aggrefact_cnndm": {"HHEM-2.1-Open": 62.8, "MiniCheck-Flan-T5-L": 69.9, "GPT-4o": 68.1,
                        "Bespoke-MiniCheck-7B": 65.5},
    "aggrefact_xsum": {"HHEM-2.1-Open": 67.8, "MiniCheck-Flan-T5-L": 74.3, "GPT-4o": 76.8,
                       "Bespoke-MiniCheck-7B": 77.8},
}


# where git is asked which commit runs: conli's own folder, whatever the working directory
CODE_DIR = Path(__file__).resolve().parent


@functools.cache
def git_state() -> tuple[str | None, bool | None]:
    """The commit conli runs from, and whether its tracked files differ, read once a process.

    Asked of the package's own folder, not the working directory: a run from another
    checkout (or with ``PYTHONPATH`` pointing at one) must name the code it ran; None where
    conli is not in a checkout (an installed wheel). Read when a run starts, so a result
    names that code, not a commit made while it ran.
    """
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return _git("rev-parse", "HEAD"), bool(dirty) if dirty is not None else None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10,
                              check=True, cwd=CODE_DIR)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def file_digest(path: Path) -> str:
    """SHA-256 of a file, or of a folder's files in name order (pins the exact data used)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def provenance(
    *, argv: Sequence[str] | None, backend: str, model: str, settings: Settings,
    templates: Iterable[str], data_files: Iterable[Path] = (), seed: int | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Everything needed to reproduce a result: command, commit, backend, templates, machine."""
    commit, dirty = git_state()
    return {
        "command": shlex.join(["conli", "eval", *(argv or [])]) if argv is not None
        else shlex.join(sys.argv),
        "git_commit": commit,
        "git_dirty": dirty,
        "conli_version": __version__,
        "backend": backend,
        "model": model,
        "templates": sorted(set(templates)),
        "settings": json.loads(settings.model_dump_json(exclude={"cache_dir"})),
        "seed": seed,
        "limit": limit,
        "data": {str(p): file_digest(p) for p in data_files},
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
        },
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def write_results(out_dir: Path, payload: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    """``results.json`` and ``results.md`` in ``out_dir``."""
    json_path, md_path = out_dir / "results.json", out_dir / "results.md"
    write_atomically(json_path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    write_atomically(md_path, markdown)
    return json_path, md_path


def publish(out_dir: Path, payload: dict[str, Any], markdown: str) -> int:
    """An experiment script's last step: its results written to ``out_dir``, its table printed.

    ``write_results`` (the folder made if need be), then the Markdown on stdout as written;
    returns the script's exit status, 0.
    """
    write_results(out_dir, payload, markdown)
    sys.stdout.write(markdown)
    return 0


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * float(value):.1f}"


def _signed_pct(value: Any) -> str:
    return "–" if value is None else f"{100 * float(value):+.1f}"


def _num(value: Any, digits: int = 2) -> str:
    return "–" if value is None else f"{float(value):.{digits}f}"


def _header(meta: dict[str, Any]) -> list[str]:
    return [
        f"- command: `{meta['command']}`",
        f"- commit: `{meta['git_commit']}`{' (dirty)' if meta.get('git_dirty') else ''}; "
        f"backend: `{meta['backend']}`; model: `{meta['model']}`",
        f"- templates: {', '.join(meta['templates']) or '–'}",
        f"- machine: {meta['machine']['platform']}, {meta['machine']['cpu_count']} CPUs",
        "",
    ]


def detection_markdown(payload: dict[str, Any]) -> str:
    """One row per dataset plus the average; metrics in percent, unverified counted as wrong."""
    meta, scores = payload["provenance"], payload["scores"]
    progress = payload.get("progress") or {}
    partial = (
        [f"**Partial run: {progress['done']} of {progress['planned']} examples** (a seeded random "
         "subsample); re-run the same command to continue.", ""]
        if progress.get("done", 0) < progress.get("planned", 0) else []
    )
    ran = ", ".join(payload.get("detectors") or []) or "none recorded"
    lines = [f"# Detection: {ran}", "", f"- detectors that ran: {ran} (ablation "
             f"`{payload['ablation']}`)", *_header(meta), *partial,
             "| dataset | n | F1-macro | F1-halluc | F1-non-halluc | BAcc | AUROC (flag share) "
             "| AUROC (1 - support score) | AUROC (judge) | unverified | published BAcc |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, entry in scores["datasets"].items():
        r = entry["response"]
        published = "; ".join(f"{k} {v}" for k, v in PUBLISHED.get(name, {}).items()) or "–"
        auc = r["auroc"]
        lines.append(
            f"| {name} | {r['n']} | {_pct(r['f1_macro'])} | {_pct(r['f1_hallucinated'])} | "
            f"{_pct(r['f1_supported'])} | {_pct(r['balanced_accuracy'])} | "
            f"{_pct(auc.get('flagged_share', {}).get('value'))} | "
            f"{_pct(auc.get('not_entailed', {}).get('value'))} | "
            f"{_pct(auc.get('judge_inverted', {}).get('value'))} | "
            f"{r['unverified']} ({_pct(r['unverified_rate'])}%) | {published} |"
        )
    avg = scores["average"]["response"]
    if avg:
        lines.append(f"| average | | {_pct(avg['f1_macro'])} | {_pct(avg['f1_hallucinated'])} | "
                     f"{_pct(avg['f1_supported'])} | {_pct(avg['balanced_accuracy'])} | | | | "
                     f"{_pct(avg['unverified_rate'])}% | |")
    sentence_rows = [(n, e["sentence"]) for n, e in scores["datasets"].items() if "sentence" in e]
    if sentence_rows:
        lines += ["", "Sentence level:", "",
                  "| dataset | sentences | F1-macro | F1-halluc | F1-non-halluc | BAcc | "
                  "unverified | uncovered |", "|---|---|---|---|---|---|---|---|"]
        for name, s in sentence_rows:
            lines.append(f"| {name} | {s['n']} | {_pct(s['f1_macro'])} | "
                         f"{_pct(s['f1_hallucinated'])} | {_pct(s['f1_supported'])} | "
                         f"{_pct(s['balanced_accuracy'])} | {s['unverified']} | {s['uncovered']} |")
    lines += ["", "Metrics in percent; an `unverified` prediction is scored as wrong. Published "
              "BAcc are on the AggreFact *test* cuts; these rows are validation cuts.", ""]
    return "\n".join(lines)


def rewrite_markdown(payload: dict[str, Any]) -> str:
    """Before/after table per dataset."""
    lines = ["# Rewrite", "", *_header(payload["provenance"]),
             "| dataset | n | changed | R-1 raw→ref | R-1 refined→ref | R-L raw→ref | "
             "R-L refined→ref | BLEU raw→ref | BLEU refined→ref | R-L refined vs raw | "
             "zero flags raw | zero flags refined | judge raw | judge refined |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in payload["datasets"].items():
        raw, refined = r["vs_reference"]["raw"], r["vs_reference"]["refined"]
        lines.append(
            f"| {name} | {r['n']} | {r['changed']} | {_pct(raw.get('rouge1'))} | "
            f"{_pct(refined.get('rouge1'))} | {_pct(raw.get('rougeL'))} | "
            f"{_pct(refined.get('rougeL'))} | {_num(raw.get('bleu'), 1)} | "
            f"{_num(refined.get('bleu'), 1)} | {_pct(r['refined_vs_raw'].get('rougeL'))} | "
            f"{_pct(r['zero_flags']['raw'])} | {_pct(r['zero_flags']['refined'])} | "
            f"{_num(r['judge']['raw']['mean'])} | {_num(r['judge']['refined']['mean'])} |"
        )
    return "\n".join([*lines, ""])


def _ci(interval: list[float] | None, *, percent: bool = False) -> str:
    if not interval:
        return ""
    if percent:
        return f" [{100 * interval[0]:.0f}, {100 * interval[1]:.0f}]"
    return f" [{interval[0]:.2f}, {interval[1]:.2f}]"


def _progress_line(payload: dict[str, Any]) -> list[str]:
    """Say so when a budget cut the run short: its figures cover the documents done."""
    done = payload.get("progress", {})
    if done.get("documents_done", 0) >= done.get("documents_planned", 0):
        return []
    return [f"- partial: {done['documents_done']} of {done['documents_planned']} documents "
            "(the sets taken in turn); re-run the command to go on"]


def judge_markdown(payload: dict[str, Any]) -> str:
    """Residual table, progression table and the targets per judge mode."""
    intervals = payload.get("intervals", {})
    lines = ["# Judge evaluation", "", f"- detectors (grounded mode): "
             f"{', '.join(payload.get('detectors') or [])}", *_progress_line(payload),
             *_header(payload["provenance"]),
             "| mode | task | n | residual | residual (unverified as 4) | unverified |",
             "|---|---|---|---|---|---|"]
    for mode, tasks in payload["residuals"].items():
        for task, row in tasks.items():
            ci = intervals.get(mode, {}).get("residual_all") if task == "all" else None
            lines.append(f"| {mode} | {task} | {row['n']} | {_num(row['residual'])}{_ci(ci)} | "
                         f"{_num(row['residual_unverified_as_4'])} | {row['unverified']} |")
    pcts = sorted({int(p) for kinds in payload["progression"].values()
                   for row in kinds.values() for p in row["mean_score"]})
    lines += ["", f"| mode | kind | items | {' | '.join(f'{p}%' for p in pcts)} | "
              "Δ per 20% step |", "|---|---|---|" + "---|" * (len(pcts) + 1)]
    for mode, kinds in payload["progression"].items():
        for kind, row in kinds.items():
            means = {int(p): v for p, v in row["mean_score"].items()}
            cells = " | ".join(_num(means.get(p)) for p in pcts)
            ci = intervals.get(mode, {}).get(f"delta_{kind}")
            lines.append(f"| {mode} | {kind} | {row['items']} | {cells} | "
                         f"{_num(row['delta_per_step'])}{_ci(ci)} |")
    if payload.get("targets"):
        lines += ["", "| mode | gold text >= 4 | gold text 5 | 100% hallucinated <= 2 | "
                  "judge s a call (timed) | reasoning checked | errors dropped | "
                  "below 5 with no error tied |",
                  "|---|---|---|---|---|---|---|---|"]
        for mode, row in payload["targets"].items():
            ci = intervals.get(mode, {})
            lines.append(
                f"| {mode} | {_pct(row['gold_at_least_4'])}"
                f"{_ci(ci.get('gold_at_least_4'), percent=True)} of {row['gold_n']} | "
                f"{_pct(row['gold_scored_5'])} | {_pct(row['all_hallucinated_at_most_2'])}"
                f"{_ci(ci.get('all_hallucinated_at_most_2'), percent=True)} of "
                f"{row['all_hallucinated_n']} | "
                f"{_num(row['judge_seconds_mean'])} ({row['judge_calls_timed']}) | "
                f"{_pct(row['reasoning_checked'])} of {row['reasoning_n']} | "
                f"{row.get('dropped_errors', 0)} | {_pct(row.get('below_5_untied'))} |")
        lines += ["", "Scores are rounded to the rubric's integers for the shares (>= 3.5 "
                  "counts as 4, <= 2.5 as 2). `grounded` scores through the scale that ships "
                  "(named in the templates); where that scale was fitted on judge documents, "
                  "through one fitted on the other datasets' items instead, which is also the "
                  "`fitted leave-one-dataset-out` row."]
    areas = payload.get("auroc", {})
    sets = sorted({name for per_set in areas.values() for name in per_set} - {"all"})
    if areas:
        lines += ["", f"| mode | {' | '.join([*sets, 'all'])} |",
                  "|---|" + "---|" * (len(sets) + 1)]
        lines += [f"| {mode} | " + " | ".join(
            f"{_pct(per_set.get(name, {}).get('auroc'))}"
            f"{_ci(intervals.get(mode, {}).get(f'auroc_{name}'), percent=True)}"
            f" ({per_set.get(name, {}).get('n', 0)})"
            for name in [*sets, "all"]) + " |" for mode, per_set in areas.items()]
        lines += ["", "AUROC [95% interval, resampling documents] (n texts) for \"the text "
                  "has a wrong sentence\" over the texts above: gold against every text with "
                  "an error swapped in or added."]
    if payload.get("plot"):
        lines += ["", f"![progression]({Path(payload['plot']).name})"]
    return "\n".join([*lines, ""])


SEED_001 = {  # seed 001 Tables 1 and 3 (ROUGE / salience / classifier)
    ("unparaphrased", "hallucination"): "0.772 / 0.736 / 0.998",
    ("unparaphrased", "coverage"): "0.890 / 0.875 / 0.986",
    ("paraphrased", "hallucination"): "0.680 / 0.708 / 0.977",
    ("paraphrased", "coverage"): "0.746 / 0.831 / 0.993",
    ("unparaphrased", "hallucinated_words"): "0.697 / 0.710",
    ("unparaphrased", "uncovered_words"): "0.693 / 0.808",
    ("paraphrased", "hallucinated_words"): "0.614 / 0.673",
    ("paraphrased", "uncovered_words"): "0.582 / 0.742",
}


def coverage_markdown(payload: dict[str, Any]) -> str:
    """Example- and word-level ROC AUC per method, beside seed 001's figures."""
    kinds = payload["kinds"]
    lines = ["# Coverage evaluation (seed 001 synthetic errors)", "",
             *_header(payload["provenance"]),
             f"{payload['documents']} documents, {payload['examples']} examples "
             f"({kinds['clean']} clean, {kinds['coverage']} coverage errors, "
             f"{kinds['hallucination']} hallucinations); "
             f"{payload['unverified_judgements']} NLI judgements unverified (counted as not "
             "entailed).", "",
             "| set | error | word overlap | model (NLI) | model (hidden-state alignment) "
             "| seed 001: ROUGE / salience / classifier |",
             "|---|---|---|---|---|---|"]
    for name, row in payload["example_level"].items():
        for error in ("hallucination", "coverage"):
            lines.append(f"| {name} | {error} | {_num(row[error]['overlap'], 3)} | "
                         f"{_num(row[error]['nli'], 3)} | "
                         f"{_num(row[error].get('semantic'), 3)} | {SEED_001[(name, error)]} |")
    lines += ["", "| set | words | n | lexical | semantic (hidden states) | "
              "seed 001: ROUGE / salience |", "|---|---|---|---|---|---|"]
    for name, row in payload["word_level"].items():
        for error, count in (("hallucinated_words", "hallucination"),
                             ("uncovered_words", "coverage")):
            methods = row[error]
            lines.append(f"| {name} | {error.replace('_', ' ')} | {row['words'][count]} | "
                         f"{_num(methods.get('lexical'), 3)} | "
                         f"{_num(methods.get('semantic'), 3)} | {SEED_001[(name, error)]} |")
    return "\n".join([*lines, ""])


def judge_auroc_markdown(payload: dict[str, Any]) -> str:
    """The judge's AUROC for any hallucination, per set: grounded (all, sample), rubric."""
    lines = ["# Judge AUROC on labelled sets", "", *_header(payload["provenance"]),
             f"Grounded scores from `{payload['predictions']}`.", "",
             "| set | grounded, all (n) | grounded, sample (n) | rubric, sample (n, unverified) "
             "| grounded - rubric, sample |",
             "|---|---|---|---|---|"]
    rows = {**payload["datasets"], "pooled": payload["pooled"]}
    for name, row in rows.items():
        rubric = row.get("rubric_sample")
        gap = row.get("grounded_minus_rubric") or {}
        lines.append(
            f"| {name} | {_pct(row['grounded_all']['auroc'])} ({row['grounded_all']['n']}) | "
            f"{_pct(row['grounded_sample']['auroc'])} ({row['grounded_sample']['n']}) | "
            + (f"{_pct(rubric['auroc'])} ({rubric['n']}, {rubric['unverified']}) | "
               if rubric else "– | ")
            + (f"{_signed_pct(gap['difference'])}{_ci(gap.get('interval'), percent=True)} |"
               if gap.get("difference") is not None else "– |"))
    lines += ["", "AUROC of 6 - score for \"the response has a hallucination\"; the difference "
              "is on the same sampled examples, [95% interval] resampling them."]
    return "\n".join([*lines, ""])


def generate_markdown(payload: dict[str, Any]) -> str:
    """Faithfulness and informativeness per decoding method (seed 002 Table 2)."""
    fod = payload.get("fod", {})
    lines = ["# Faithful generation", "", *_header(payload["provenance"]),
             f"{payload['sources']} sources; FOD with S = {fod.get('S')}, K = {fod.get('K')}, "
             f"tau1 = {fod.get('tau1')}, tau2 = {fod.get('tau2')}; faithfulness = share of "
             "sentences cot NLI finds supported (abstentions left out), judge = grounded score "
             "from those verdicts.", ""]
    tables = {"all sources": payload["methods"], **payload.get("datasets", {})}
    for name, methods in tables.items():
        lines += [f"## {name}", "",
                  "| method | answers | abstained | supported share | judge | sentences | "
                  "content words | kept vs greedy | s an answer | x greedy time |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for method, row in methods.items():
            lines.append(
                f"| {method} | {row['answers']} | {row['abstained']} | "
                f"{_pct(row['supported_share'])} | {_num(row['judge'])} | "
                f"{_num(row['sentences'], 1)} | {_num(row['content_words'], 1)} | "
                f"{_pct(row['content_kept_vs_greedy'])} | {_num(row['seconds'], 1)} | "
                f"{_num(row['time_vs_greedy'], 1)} |")
        lines.append("")
    return "\n".join(lines)

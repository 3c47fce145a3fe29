"""``conli eval``: measure detection, rewriting and the judge on labelled data.

    conli eval detect  --dataset NAME ... [--ablation hierarchical] [--limit N --seed S]
    conli eval rewrite --dataset NAME ... [--hallucinated-only]
    conli eval judge   --dataset NAME ... [--max-sentences 5] [--modes grounded rubric]
    conli eval run CONFIG [--resume] [--dry-run]     # and compare, decide, injection:
                                                     # conli.cli.eval_runs

Every model call goes through a disk cache (``--cache-dir``), so a re-run costs nothing.
Each run writes ``results.json`` and ``results.md`` (and ``predictions.jsonl`` for detect)
to ``--out``, with the command, commit, backend, model, templates and machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from conli.backends.base import Backend
from conli.backends.cache import CachedBackend
from conli.cli import eval_runs
from conli.cli.eval_args import (
    Recorded,
    base_settings,
    command,
    datasets,
    eval_backend,
    finish,
    meta,
    out_dir,
    progress,
    recorded_backend,
)
from conli.cli.flags import add_session_flags
from conli.config import Settings
from conli.errors import ConfigError
from conli.evaluation import (
    coverage_eval,
    detection,
    generate_eval,
    judge_eval,
    judge_figures,
    report,
    rewrite,
)
from conli.evaluation.loaders import (
    DATASETS,
    FORMATS,
)
from conli.evaluation.run_folder import claim_run_folder
from conli.files import LogAppender, read_log, write_atomically
from conli.generation import METHODS
from conli.run.plan import make_plan, options

DEFAULT_DATA_DIR = Path("../shared/data")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``eval`` with its ``detect``/``rewrite``/``judge`` sub-commands; sets ``handler``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "eval", help="measure detection, rewriting and the judge on labelled data")
    kinds = parser.add_subparsers(dest="eval_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    data = common.add_argument_group("data")
    data.add_argument("--dataset", action="append", default=[],
                      help="named set under --data-dir (repeatable, or 'all'): "
                      + ", ".join(DATASETS))
    data.add_argument("--file", type=Path, action="append", default=[],
                      help="your own data file (repeatable); see --format")
    data.add_argument("--format", choices=sorted(FORMATS), default="jsonl",
                      help="format of --file (default jsonl: source, response, label, ...)")
    data.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                      help=f"folder of the named sets (default {DEFAULT_DATA_DIR})")
    data.add_argument("--limit", type=int, help="examples per dataset (stratified by label)")
    data.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    data.add_argument("--no-stratify", action="store_true", help="sample without stratifying")
    data.add_argument("--no-question", action="store_true",
                      help="check answers without their question (to measure what it adds)")
    run = common.add_argument_group("run")
    add_session_flags(run)
    run.add_argument("--cache-dir", type=Path,
                     help="model-call cache (default: <CONLI_CACHE_DIR>/eval-calls)")
    run.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    run.add_argument("--out", type=Path, help="result folder (default "
                     "benchmarks/results/<kind>-<time>)")
    run.add_argument("--progress", action="store_true", help="print progress to stderr")

    detect = kinds.add_parser("detect", parents=[common], help="F1, BAcc, AUROC of detection")
    detect.add_argument("--ablation", choices=sorted(detection.ABLATIONS), default="hierarchical")
    detect.add_argument("--judge", action="store_true",
                        help="also score each response with the judge (gives a judge AUROC)")
    detect.add_argument("--budget-minutes", type=float,
                        help="start no new example after this long; re-run to continue")
    detect.set_defaults(handler=run_detect)

    rewrite_parser = kinds.add_parser("rewrite", parents=[common],
                                      help="ROUGE/BLEU, zero-flag share, judge before/after")
    rewrite_parser.add_argument("--hallucinated-only", action="store_true",
                                help="rewrite only the gold-hallucinated responses (as the paper)")
    rewrite_parser.set_defaults(handler=run_rewrite)

    judge = kinds.add_parser("judge", parents=[common],
                             help="residuals and the 0-100%% hallucination progression")
    judge.add_argument("--min-sentences", type=int, default=3,
                       help="gold responses need at least this many sentences (default 3)")
    judge.add_argument("--max-sentences", type=int, default=5,
                       help="and are cut to at most this many (default 5: 20%% steps)")
    judge.add_argument("--modes", nargs="+", choices=judge_eval.MODES,
                       default=list(judge_eval.MODES),
                       help="grounded: scored from the detectors' verdicts through a scale "
                       "fitted leave-one-dataset-out; rubric: the model reads the rubric")
    judge.add_argument("--reasoning-items", type=int, default=10,
                       help="grounded mode writes reasoning for this many items' end texts")
    judge.add_argument("--write-scale", type=Path, metavar="FILE",
                       help="write the grounded scale fitted on every item here (to ship: "
                       "src/conli/signals/grounded_scale.v1.json)")
    judge.add_argument("--budget-minutes", type=float,
                       help="start no new document after this long (the sets taken in turn); "
                       "re-run to go on from OUT/scored.jsonl")
    judge.add_argument("--no-plot", action="store_true", help="skip the PNG")
    judge.set_defaults(handler=run_judge)

    areas = kinds.add_parser("judge-auroc", parents=[common],
                             help="the judge's AUROC for any hallucination on labelled sets")
    areas.add_argument("--predictions", type=Path, required=True,
                       help="predictions.jsonl of a `conli eval detect` run (cot verdicts)")
    areas.add_argument("--per-dataset", type=int, default=10,
                       help="examples a set the rubric judge scores (default 10)")
    areas.add_argument("--skip", type=int, default=0, metavar="N",
                       help="pass over the first N of each set before sampling (the "
                       "examples a shipped classifier was trained on)")
    areas.set_defaults(handler=run_judge_auroc)

    gen = kinds.add_parser("generate", parents=[common],
                           help="faithful decoding against its baselines (seed 002 Table 2)")
    gen.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    gen.add_argument("--budget-minutes", type=float,
                     help="start no new source after this long (the table covers those done)")
    gen.set_defaults(handler=run_generate_eval)

    cover = kinds.add_parser("coverage", parents=[common],
                             help="seed 001's synthetic coverage and hallucination errors")
    cover.add_argument("--no-model", action="store_true",
                       help="word overlap only (no paraphrase, NLI or semantic word scores)")
    cover.set_defaults(handler=run_coverage)
    eval_runs.add_parsers(kinds)
    parser.set_defaults(
        handler=lambda args: parser.error("choose an evaluation: " + ", ".join(kinds.choices)))
    return parser


# --- the three evaluations ---------------------------------------------------------------


def run_detect(args: argparse.Namespace) -> int:
    """Score detection for one ablation over the chosen datasets.

    Examples run in a seeded random order and each prediction is appended to
    ``predictions.jsonl`` as it is made; re-running the same command into the same
    ``--out`` skips what is there, so ``--budget-minutes`` slices of a long run add up.
    """
    from conli.pipeline import Checker

    try:
        settings = detection.ablation_settings(args.ablation, base_settings(args))
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    settings = make_plan(settings, options(mitigate=False, judge=bool(args.judge))).settings
    sets, paths = datasets(args)
    out = out_dir(args, f"detect-{args.ablation}")
    out.mkdir(parents=True, exist_ok=True)
    done = _resume(out, settings, args)
    planned = detection.run_order(sets.values(), args.seed)
    wanted = {(e.dataset, e.id) for e in planned}
    outcomes = [o for o in done if (o.dataset, o.example_id) in wanted]
    finished = {(o.dataset, o.example_id) for o in outcomes}
    todo = [e for e in planned if (e.dataset, e.id) not in finished]
    deadline = None if args.budget_minutes is None else time.monotonic() + 60 * args.budget_minutes
    runs = bool(todo) and (args.budget_minutes is None or args.budget_minutes > 0)
    backend = eval_backend(args, settings) if runs else None  # scoring alone loads no model
    checker = Checker(settings, backend) if backend is not None else None
    log = LogAppender(out / detection.PREDICTIONS)

    def record(outcome: detection.Outcome) -> None:
        log.write(outcome.to_json())
        outcomes.append(outcome)

    try:
        if checker is not None:
            detection.run_detection(checker, todo, on_outcome=record, progress=args.progress,
                                    deadline=deadline)
    except KeyboardInterrupt:
        print("\ninterrupted: scoring what is done", file=sys.stderr)
    finally:
        log.close()
        if checker is not None:
            checker.close()
    templates = {t for o in outcomes if o.result for t in o.result.templates}
    source = backend if backend is not None else recorded_backend(settings, outcomes)
    payload = {"kind": "detect", "ablation": args.ablation,
               "detectors": detection.detectors_that_ran(outcomes),
               "progress": {"done": len(outcomes), "planned": len(planned)},
               "provenance": meta(args, source, settings, templates, paths),
               "scores": detection.score_outcomes(outcomes)}
    return finish(out, payload, report.detection_markdown(payload))




def _resume(out: Path, settings: Settings, args: argparse.Namespace) -> list[detection.Outcome]:
    """Predictions an earlier run of the same set-up left in ``out``; refuse a different one."""
    manifest = {"ablation": args.ablation, "judge": bool(args.judge),
                **({"no_question": True} if args.no_question else {}),
                "settings": json.loads(settings.model_dump_json(exclude={"cache_dir"}))}
    claim_run_folder(out, manifest)
    detection.expand_predictions(out)  # a stored run's gzipped log: appends go to it unzipped
    return detection.read_predictions(out, detection.Outcome.from_json)


def run_rewrite(args: argparse.Namespace) -> int:
    """Run the full pipeline (detect, rewrite, judge), then re-detect each refined text."""
    from conli.pipeline import Checker

    plan = make_plan(base_settings(args), options(mitigate=True, judge=True, judge_raw=True))
    settings = plan.settings
    sets, paths = datasets(args)
    backend = eval_backend(args, settings)
    full = Checker(plan, backend)
    again = Checker(make_plan(settings, options(mitigate=False, judge=False)), backend)
    results: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    templates: set[str] = set()
    try:
        for name, examples in sets.items():
            if args.hallucinated_only:
                examples = [e for e in examples if e.label]
            outcomes = detection.run_detection(full, examples, progress=args.progress)
            redone = rewrite.redetect(again, outcomes, examples,
                                      progress(args.progress, f"{name} re-detect"))
            results[name] = rewrite.rewrite_report(outcomes, examples, redone)
            rows.extend(rewrite.rewrite_rows(outcomes, examples, redone))
            templates |= {t for o in outcomes if o.result for t in o.result.templates}
    finally:
        full.close()
    payload = {"kind": "rewrite", "provenance": meta(args, backend, settings, templates, paths),
               "datasets": results}
    out = out_dir(args, "rewrite")
    out.mkdir(parents=True, exist_ok=True)
    (out / "rewrites.jsonl").write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return finish(out, payload, report.rewrite_markdown(payload))


def run_judge(args: argparse.Namespace) -> int:
    """Residuals, progression and targets of each judge mode; grounded leave-one-dataset-out."""
    from conli.judges.grounded import configured_scale
    from conli.text.nlp import load_pipeline
    from conli.text.segment import sentence_splitter

    nlp = load_pipeline()
    split = sentence_splitter(nlp)

    def entities(text: str) -> list[tuple[str, str]]:
        return [(e.text, e.label_) for e in nlp(text).ents]

    settings = base_settings(args)
    sets, paths = datasets(args, sample=False)  # --limit counts gold items (documents) here
    out = out_dir(args, "judge")
    plans = []
    for examples in sets.values():
        found = judge_eval.build_items(
            [e for e in examples if not e.label], split, entities, limit=args.limit,
            sentences=(args.min_sentences, args.max_sentences), seed=args.seed)
        plans.append((found, judge_eval.plan_tasks(found, args.seed)))
    if not any(items for items, _ in plans):
        raise ConfigError(f"no gold response has {args.min_sentences} sentences in these sets")
    deadline = None if args.budget_minutes is None else \
        time.monotonic() + 60 * args.budget_minutes
    out.mkdir(parents=True, exist_ok=True)
    # the documents an earlier run of this set-up scored: a re-run goes on from them
    claim_run_folder(out, {
        "kind": "judge", "modes": sorted(args.modes), "seed": args.seed,
        "sentences": [args.min_sentences, args.max_sentences],
        "reasoning_items": args.reasoning_items,
        "settings": json.loads(settings.model_dump_json(exclude={"cache_dir"}))})
    # one record a document, so a crash never leaves a document half in the journal
    done = [row for rows in read_log(out / "scored.jsonl", judge_eval.rows_from_json)
            for row in rows]
    backend = eval_backend(args, settings)
    log = LogAppender(out / "scored.jsonl")

    def journal(rows: list[judge_eval.Scored]) -> None:
        log.write({"rows": [row.to_json() for row in rows]})

    try:
        run = judge_eval.score_documents(
            backend, plans, settings, args.modes, args.reasoning_items, deadline=deadline,
            progress=progress(args.progress, "judge documents"), done=done,
            on_document=journal)
    finally:
        log.close()
        backend.close()
    items, rubric, evidence = run.items, run.rubric, run.evidence
    shipped = configured_scale(settings)
    scored = [*rubric, *judge_eval.grounded_rows(evidence, shipped)]
    progression = judge_figures.progression(scored)
    plot = None
    if not args.no_plot:
        plot = str(judge_figures.plot_progression(progression, out / "progression.png"))
    residuals = judge_figures.residual_table(scored)
    payload: dict[str, Any] = {
        "kind": "judge",
        "provenance": meta(args, backend, settings, {s.template for s in scored}, paths),
        "detectors": run.detectors,  # resolved: `auto` named what it became
        "progress": {"documents_done": len(items), "documents_planned": run.planned},
        "items": [item.__dict__ for item in items],
        "residuals": residuals,
        "progression": progression,
        "targets": judge_figures.targets(scored),
        "auroc": judge_figures.auroc_by_set(scored),
        "intervals": judge_figures.bootstrap_intervals(scored, args.seed),
        "plot": plot,
        "scores": [{"item": s.task.item, "dataset": s.dataset, "task": s.task.task,
                    "pct": s.task.pct, "mode": s.mode, "expected": s.task.expected,
                    "target": s.task.target, "score": s.score, "evidence": s.evidence,
                    "error": s.error, "seconds": s.seconds,
                    "reasoning_status": s.reasoning_status,
                    "dropped_errors": s.dropped_errors,
                    "tied_errors": s.tied_errors} for s in scored],
    }
    if args.write_scale and evidence:
        scale = judge_eval.fit_scale(evidence)
        scale = replace(scale, training={
            "fitted_on": f"{len(evidence)} texts of {len(items)} documents",
            "datasets": sorted({s.dataset for s in evidence}), "command": command(),
            "detectors": run.detectors, "seed": args.seed,
            # the fit's own held-out figure: its row, or `grounded` where that is the fit
            "leave_one_dataset_out": (residuals.get(judge_eval.FITTED_MODE)
                                      or residuals.get("grounded", {})).get("all")})
        write_atomically(args.write_scale, json.dumps(scale.to_json(), indent=1) + "\n")
    return finish(out, payload, report.judge_markdown(payload))


def run_coverage(args: argparse.Namespace) -> int:
    """Build seed 001's synthetic pairs from the dev data and score each method's AUC."""
    from conli.text.segment import sentence_splitter

    split = sentence_splitter()
    settings = base_settings(args)
    sets, paths = datasets(args, sample=False)  # --limit counts documents here
    examples = [e for found in sets.values() for e in found]
    bases = coverage_eval.build_bases(examples, split, limit=args.limit or 40, seed=args.seed)
    if not bases:
        raise ConfigError("no document has a faithful 3-5 sentence summary and another to "
                          "draw an unused point from (SummEval has both)")
    backend = None if args.no_model else eval_backend(args, settings)
    try:
        if backend is not None:
            coverage_eval.paraphrase(backend, bases, settings)
        else:
            for base in bases:
                base.paraphrased = []
        reader = backend.inner if isinstance(backend, CachedBackend) else backend
        payload = coverage_eval.evaluate(backend, bases, split, settings, seed=args.seed,
                                         reader=reader,
                                         progress=progress(args.progress, "coverage"))
    finally:
        if backend is not None:
            backend.close()
    templates = {"paraphrase_point.v1"} if backend is not None else set()
    recorded: Backend | Recorded = backend if backend is not None else Recorded("none", "none")
    payload = {"kind": "coverage",
               "provenance": meta(args, recorded, settings, templates, paths), **payload}
    return finish(out_dir(args, "coverage"), payload, report.coverage_markdown(payload))


def run_judge_auroc(args: argparse.Namespace) -> int:
    """Grounded scores from a stored detect run; the rubric judge on a sample of it."""
    from conli.judges import rubric as judge_agent
    from conli.judges.grounded import configured_scale

    settings = base_settings(args)
    sets, paths = datasets(args, sample=False)
    examples = {e.id: e for found in sets.values() for e in found}
    scale = configured_scale(settings)
    stored = [row for row in judge_eval.stored_grounded_scores(args.predictions, scale)
              if row[0] in examples]
    if not stored:
        raise ConfigError(f"no prediction in {args.predictions} is from these datasets")
    backend = eval_backend(args, settings) if args.per_dataset else None
    try:
        by_set = {name: judge_eval.judge_auroc(
            [r for r in stored if r[1] == name], examples, backend, settings, args.per_dataset,
            progress(args.progress, f"rubric judge {name}"), skip=args.skip)
            for name in sorted({r[1] for r in stored})}
        pooled = {"grounded_all": judge_eval.auroc_of([(g, s) for _, _, g, s in stored]),
                  **judge_eval.sample_aurocs([s for found in by_set.values()
                                              for s in found["sample"]])}
    finally:
        if backend is not None:
            backend.close()
    recorded: Backend | Recorded = backend or Recorded("none", "none")
    rubric_template = set() if backend is None else \
        {judge_agent.template_name(settings, backend.capabilities)}  # no rubric, no template
    payload = {"kind": "judge-auroc", "predictions": str(args.predictions),
               "scale": scale.version,
               "provenance": meta(args, recorded, settings, rubric_template, paths),
               "datasets": by_set, "pooled": pooled}
    return finish(out_dir(args, "judge-auroc"), payload, report.judge_auroc_markdown(payload))


def run_generate_eval(args: argparse.Namespace) -> int:
    """Answer ``--limit`` sources a set with each method; check every answer with cot."""
    from conli.text.segment import sentence_splitter

    settings = base_settings(args)
    sets, paths = datasets(args, sample=False)
    examples = generate_eval.sources(sets, args.limit or 20)
    backend = eval_backend(args, settings)
    try:
        deadline = None if args.budget_minutes is None else \
            time.monotonic() + 60 * args.budget_minutes
        rows = generate_eval.run(backend, examples, args.methods,
                                 sentence_splitter(), settings,
                                 progress(args.progress, "generate"), deadline=deadline)
    finally:
        backend.close()
    templates = {"generate_answer.v1"}
    payload = {"kind": "generate", "provenance": meta(args, backend, settings, templates, paths),
               "sources": len({r["id"] for r in rows}),
               "fod": {"S": settings.fod_samples, "K": settings.fod_beams,
                       "tau1": settings.fod_backtrack, "tau2": settings.fod_prune},
               "methods": generate_eval.table(rows),
               "datasets": {name: generate_eval.table([r for r in rows if r["dataset"] == name])
                            for name in dict.fromkeys(r["dataset"] for r in rows)},
               "rows": rows}
    return finish(out_dir(args, "generate"), payload, report.generate_markdown(payload))

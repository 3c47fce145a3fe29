"""``conli calibrate``: fit the decision to a user's labelled examples (``conli.calibration``).

    conli calibrate --file labelled.jsonl [--out calibration.json] [--folds 5]

It checks every example with the uncalibrated detectors (through the evaluation's call
cache, so a re-run costs nothing), fits by cross-validation, prints balanced accuracy
before and after (the cross-validated figure), and writes the file whole. Data that
cannot calibrate (too few examples, one label only) is refused before any model loads;
nothing is written on any refusal. Marks of one example by several reviewers (the report's,
four eyes) give the label they agree on; those they disagree on are named and left out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from conli import detectors
from conli.calibration import (
    FOLDS,
    Scored,
    calibration_record,
    fit_calibration,
    refuse_unusable,
)
from conli.cli.display import printable
from conli.cli.flags import add_session_flags, session_settings
from conli.errors import ConfigError, InputError
from conli.evaluation.detection import Outcome, run_detection
from conli.evaluation.loaders import FORMATS, load_file
from conli.files import ensure_writable, write_atomically
from conli.gate import ranking_score
from conli.run.plan import plan_for
from conli.signals.model import FUSED_ARTIFACT, load_model
from conli.training.data import rows_of
from conli.training.marks import Disagreement

_NAMED = 10  # examples named on stderr when detection could not check them


def add_parser(subparsers: Any) -> None:
    """``conli calibrate``; sets ``handler``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "calibrate", help="fit the decision threshold to your own labelled examples")
    parser.add_argument("--file", type=Path, required=True,
                        help="labelled examples, one JSON object a line: source, response, "
                        "label (1/true = hallucinated), optional question and sentences")
    parser.add_argument("--format", choices=sorted(FORMATS), default="jsonl",
                        help="format of --file (default jsonl, as conli eval reads it)")
    parser.add_argument("--out", type=Path, default=Path("calibration.json"),
                        help="the calibration file to write (default calibration.json)")
    parser.add_argument("--folds", type=int, default=FOLDS,
                        help=f"cross-validation folds (default {FOLDS})")
    parser.add_argument("--seed", type=int, default=0, help="fold assignment seed")
    add_session_flags(parser)
    parser.add_argument("--cache-dir", type=Path,
                        help="model-call cache (default: <CONLI_CACHE_DIR>/eval-calls)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument("--progress", action="store_true", help="print progress to stderr")
    parser.set_defaults(handler=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    """Check, fit, report, write; refusals come before any model call."""
    from conli.cli.eval_args import eval_backend
    from conli.evaluation.metrics import require_eval_extra
    from conli.pipeline import Checker

    require_eval_extra()
    if args.folds < 2:
        raise ConfigError("--folds must be at least 2")
    if args.calibration:
        raise ConfigError("conli calibrate fits the uncalibrated detectors: drop --calibration")
    uncalibrated = {"tuning": {"calibration": None}}
    plan = plan_for(session_settings(args), "check", more=uncalibrated)
    settings = plan.settings
    ensure_writable(args.out)
    data = args.file.read_bytes() if args.file.is_file() else b""
    disagreements: list[Disagreement] = []
    examples = load_file(args.file, args.format, disagreements=disagreements)
    _name(disagreements)
    refuse_unusable([e.label for e in examples], args.folds)
    checker = Checker(plan, eval_backend(args, settings))
    try:
        names = detectors.resolve(checker.settings)
        outcomes = run_detection(checker, examples, progress=args.progress)
    finally:
        checker.close()
    outcomes = _checked(outcomes, args.folds)
    by_id = {e.id: e for e in examples}
    # a verdict standing in as 1 or 0 is no score to fit a cut on (fit_calibration refuses)
    scored = [Scored(o.gold, o.predicted,
                     ranking_score(o.support_score, o.result.score_method if o.result else None),
                     rows_of(by_id[o.example_id], o.result.sentences) if o.result else None)
              for o in outcomes]
    fused = load_model(checker.settings.fused_model or FUSED_ARTIFACT) if "fused" in names \
        else None
    fitted = fit_calibration(scored, folds=args.folds, seed=args.seed,
                             fused_features=fused.features if fused else (),
                             fused_keep=fused.keep_nli_flag_if if fused else ())
    record = calibration_record(
        backend=checker.backend.name, model=checker.backend.model, detectors=names,
        nli_prompt=checker.settings.nli_prompt, fitted=fitted,
        labels=[s.label for s in scored], data=data, folds=args.folds)
    write_atomically(args.out, record.model_dump_json(indent=2) + "\n")
    sys.stdout.write(
        f"examples: {record.examples} ({record.hallucinated} hallucinated)\n"
        f"detectors: {', '.join(names)}\n"
        f"balanced accuracy before: {100 * record.balanced_accuracy_before:.1f} "
        "(the shipped decision)\n"
        f"balanced accuracy after:  {100 * record.balanced_accuracy_after:.1f} "
        f"({record.folds}-fold cross-validated: each fold scored by a fit without it)\n"
        f"method: {record.method}"
        + (f" (flag a sentence at P(unsupported) >= {record.flag_at:.3f})"
           if record.flag_at is not None else " (the fused weights refitted)")
        + f"\nwrote {args.out}; use it with --calibration {args.out} or "
        f"CONLI_CALIBRATION={args.out}\n")
    if record.balanced_accuracy_after <= record.balanced_accuracy_before:
        sys.stderr.write(
            "warning: the calibrated decision does not beat the shipped one on these "
            "examples (cross-validated); keep the shipped decision, or calibrate again with "
            "more examples\n")
    return 0


def _name(disagreements: list[Disagreement]) -> None:
    """Say which examples the reviewers' marks disagree on: they are left out of the fit."""
    if not disagreements:
        return
    named = "; ".join(printable(d.describe()) for d in disagreements[:_NAMED])
    more = f"; and {len(disagreements) - _NAMED} more" if len(disagreements) > _NAMED else ""
    sys.stderr.write(f"reviewers disagree on {len(disagreements)} example(s), left out of the "
                     f"fit: {named}{more}\n")


def _checked(outcomes: list[Outcome], folds: int) -> list[Outcome]:
    """The outcomes detection could check; those it refused are named on stderr and left out.

    An example refused as input (too long, a lone surrogate) says nothing of the detectors:
    fitting on it would count a wrong answer the checker never gave. None checked is
    refused with the first one's reason.
    """
    refused = [o for o in outcomes if o.error]
    if not refused:
        return outcomes
    kept = [o for o in outcomes if not o.error]
    if not kept:
        raise InputError(f"none of the {len(outcomes)} examples could be checked, so there is "
                         f"nothing to calibrate on; {refused[0].example_id}: {refused[0].error}")
    named = "; ".join(f"{printable(o.example_id)}: {printable(o.error or '')}"
                      for o in refused[:_NAMED])
    more = f"; and {len(refused) - _NAMED} more" if len(refused) > _NAMED else ""
    sys.stderr.write(f"could not check {len(refused)} of {len(outcomes)} examples, left out "
                     f"of the fit: {named}{more}\n")
    refuse_unusable([o.gold for o in kept], folds, left_out=len(refused))
    return kept

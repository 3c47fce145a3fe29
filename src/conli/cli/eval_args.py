"""What every ``conli eval`` runner shares: data, settings, backend, out folder, provenance.

Split from ``conli.cli.eval`` (the parser and the runners) so each stays small; ``conli
calibrate`` builds its backend here too.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conli.backends import get_backend
from conli.backends.base import Backend
from conli.backends.cache import CachedBackend
from conli.cli.flags import session_settings
from conli.config import Settings
from conli.errors import ConfigError
from conli.evaluation import detection, metrics, report
from conli.evaluation.loaders import DATASETS, Example, dataset_path, load_dataset, load_file


def command() -> str:
    """Return the command as typed, spelled ``conli ...`` for both entry points."""
    if Path(sys.argv[0]).name in ("conli", "eval_cli.py"):
        return shlex.join(["conli", *sys.argv[1:]])
    return shlex.join(sys.argv)


def datasets(
    args: argparse.Namespace, *, sample: bool = True
) -> tuple[dict[str, list[Example]], list[Path]]:
    """The chosen sets (and ``--file``s) by name, with their paths; sampled unless told not."""
    names = list(DATASETS) if "all" in args.dataset else args.dataset
    if not names and not args.file:
        raise ConfigError("give --dataset NAME (or all) or --file PATH")
    loaded: dict[str, list[Example]] = {}
    paths = []
    for name in names:
        loaded[name] = load_dataset(name, args.data_dir)
        paths.append(dataset_path(name, args.data_dir))
    for path in args.file:
        examples = load_file(path, args.format)
        loaded[examples[0].dataset if examples else path.stem] = examples
        paths.append(path)
    if args.no_question:
        loaded = {name: [replace(e, question=None) for e in examples]
                  for name, examples in loaded.items()}
    if not sample:
        return loaded, paths
    sampled = {name: detection.stratified_sample(examples, args.limit, args.seed,
                                                 stratify=not args.no_stratify)
               for name, examples in loaded.items()}
    return sampled, paths


def eval_backend(args: argparse.Namespace, settings: Settings) -> Backend:
    """The backend behind the call cache (``--cache-dir``), or bare with ``--no-cache``.

    Every evaluation (and ``conli calibrate``) builds its backend here.
    """
    inner = get_backend(settings.llm, settings)
    if args.no_cache:
        return inner
    return CachedBackend(inner, args.cache_dir or settings.cache_dir / "eval-calls")


def base_settings(args: argparse.Namespace) -> Settings:
    """Every evaluation starts here: the ``[eval]`` extra is checked, the commit read.

    Both before any folder is written or model loaded (the scores need the extra; the
    provenance names the commit the run started from).
    """
    metrics.require_eval_extra()
    report.git_state()
    return session_settings(args)


def out_dir(args: argparse.Namespace, kind: str) -> Path:
    """``--out``, or a fresh time-stamped folder under benchmarks/results."""
    if args.out:
        return Path(args.out)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("benchmarks/results") / f"{kind}-{stamp}"


def meta(args: argparse.Namespace, backend: Backend | Recorded, settings: Settings,
         templates: set[str], paths: list[Path]) -> dict[str, Any]:
    """A result's provenance: ``report.provenance`` plus the command, its arguments and cache."""
    record = report.provenance(argv=None, backend=backend.name, model=backend.model,
                               settings=settings, templates=templates, data_files=paths,
                               seed=args.seed, limit=args.limit)
    record["command"] = command()
    record["args"] = {k: (str(v) if isinstance(v, Path) else
                          [str(x) for x in v] if isinstance(v, list) else v)
                      for k, v in vars(args).items() if k != "handler"}
    if isinstance(backend, CachedBackend):
        record["cache"] = {"dir": str(backend.cache_dir), "hits": backend.hits,
                           "misses": backend.misses}
    return record


def progress(enabled: bool, label: str) -> Callable[[int, int], None] | None:
    """A ``done/total`` line on stderr for ``--progress``, else None."""
    if not enabled:
        return None

    def show(done: int, total: int) -> None:
        print(f"\r{label} {done}/{total}", end="\n" if done == total else "", file=sys.stderr,
              flush=True)

    return show


def finish(out: Path, payload: dict[str, Any], markdown: str) -> int:
    """Write results.json and results.md to ``out``, print the Markdown; exit code 0."""
    json_path, md_path = report.write_results(out, payload, markdown)
    sys.stdout.write(markdown)
    print(f"\nwrote {json_path} and {md_path}", file=sys.stderr)
    return 0


@dataclass(frozen=True)
class Recorded:
    """Stands in for the backend in provenance when scoring needed no model."""

    name: str
    model: str


def recorded_backend(settings: Settings, outcomes: list[detection.Outcome]) -> Recorded:
    """Backend and model as the predictions recorded them, for a run that made no call."""
    models = sorted({o.result.model for o in outcomes if o.result})
    return Recorded(settings.llm, ", ".join(models) or "none: no prediction made")

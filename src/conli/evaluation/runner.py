"""``conli eval run CONFIG``: a config's run made exactly as its dry run shows it, then locked.

A task of the ``conli`` command runs as that command in a child process, with the config's
settings as its only ``CONLI_*`` variables (a shell's own would change the run unseen;
``CONLI_CACHE_DIR`` is kept: where calls are cached changes no figure). An experiment runs
its script the same way; ``decide`` runs here, reading stored runs only. A run never writes
over results it did not make: an ``out`` that holds files is refused unless ``--resume``
goes on from it, which only a resumable task can. When it ends, a large predictions log is
gzipped and the run enters the lock beside its config's folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conli.errors import ConfigError
from conli.evaluation import lock, runs
from conli.evaluation.compare import report, run_comparison
from conli.evaluation.detection import compress_predictions
from conli.evaluation.report import git_state, write_results

KEPT = ("CONLI_CACHE_DIR",)  # inherited settings that change no figure


def run(config_path: Path, *, resume: bool = False) -> int:
    """Make the run, enter it in the lock; the exit code of the first step that failed."""
    config = runs.load(config_path)
    if config.task == "record":
        raise ConfigError(f"{config_path} is a record, not run again: {config.why_not}")
    out = runs.out_of(config_path, config)
    claim(out, config.task, resume=resume)
    commit, _ = git_state()  # the code the run starts from
    if config.task == "decide":
        decide(config_path, config, out)
    else:
        env = environment(config.settings)
        for line in runs.argv(config_path, config):
            code = subprocess.run(executable(line), env=env, check=False).returncode
            if code != 0:
                return code
    compress_predictions(out, lock.COMPRESS_OVER)
    found = lock.lock_beside(config_path)
    if found is not None:
        lock.update(found, config_path, commit)
        print(f"locked {config_path.stem} in {found}", file=sys.stderr)
    return 0


def claim(out: Path, task: str, *, resume: bool) -> None:
    """Refuse to mix a run into a folder of results unless it goes on from them."""
    holds = out.is_dir() and any(out.iterdir())
    if holds and not resume:
        raise ConfigError(f"{out} holds a run already: --resume to go on from it, or give "
                          "the config another out")
    if holds and task not in runs.RESUMABLE:
        raise ConfigError(f"a {task} run does not resume; {out} holds one already")


def decide(config_path: Path, config: runs.RunConfig, out: Path | None) -> str:
    """The config's comparisons by the rule: the Markdown, written with its JSON to ``out``."""
    outcomes = [run_comparison(c) for c in config.compare]
    payload, markdown = report(outcomes)
    commit, dirty = git_state()
    payload["provenance"] = {"config": str(config_path), "config_sha256": runs.digest(config_path),
                             "command": runs.command(config_path, config),
                             "git_commit": commit, "git_dirty": dirty}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_results(out, payload, markdown)
    sys.stdout.write(markdown)
    return markdown


def environment(settings: dict[str, str]) -> dict[str, str]:
    """The environment to run in: ours, with the config's settings as the only ``CONLI_*``."""
    dropped = sorted(k for k in os.environ if k.startswith("CONLI_") and k not in KEPT
                     and k not in settings)
    if dropped:
        print(f"conli eval run: not passing {', '.join(dropped)} (the config's settings "
              "are the run's)", file=sys.stderr)
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, **settings}


def executable(line: list[str]) -> list[str]:
    """A rendered command line as this Python runs it (``conli`` through ``-m conli.cli``)."""
    program, *rest = line
    return [sys.executable, *(["-m", "conli.cli"] if program == "conli" else []), *rest]

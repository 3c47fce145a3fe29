"""A benchmark run as a config file (TOML): what ``conli eval run CONFIG`` runs, rendered.

A config names the task (``detect``, ``rewrite``, ``judge``, ``judge-auroc``, ``coverage``,
``generate``, ``injection``, ``bench``; ``decide``, comparisons by the rule; ``experiment``,
a script of its own; ``record``, a run kept as it was recorded and not run again), its
data (sets, files, limit, seed), its settings (``CONLI_*`` variables), the backend and
the task's other options; the results go to ``out``, by default ``results/<name>`` beside
the configs' folder. ``[recorded]`` keeps the command a stored run was made with, where
that command is written down and the commit it ran at, so that ``--dry-run`` shows both.
Paths are relative to the folder the run starts from (the checkout's root).
"""

from __future__ import annotations

import hashlib
import shlex
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from conli.config import Settings
from conli.errors import ConfigError
from conli.evaluation.compare import Comparison

Task = Literal["detect", "rewrite", "judge", "judge-auroc", "coverage", "generate",
               "injection", "bench", "decide", "experiment", "record"]
COMMANDS: dict[str, list[str]] = {  # a task run by the conli command: its subcommand
    "detect": ["eval", "detect"], "rewrite": ["eval", "rewrite"], "judge": ["eval", "judge"],
    "judge-auroc": ["eval", "judge-auroc"], "coverage": ["eval", "coverage"],
    "generate": ["eval", "generate"], "injection": ["eval", "injection"], "bench": ["bench"]}
RESUMABLE = ("detect", "judge", "experiment")  # tasks that go on from what ``out`` holds
Option = str | int | float | bool | list[str]


class Data(BaseModel):
    """What a run reads: named sets under ``data_dir`` and files, sampled by limit and seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sets: list[str] = []
    files: list[str] = []
    format: str | None = None
    data_dir: str | None = None
    limit: int | None = None
    seed: int | None = None


class Recorded(BaseModel):
    """How a stored run was made: the command as written down, where, and at which commit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str
    source: str = Field(description="where the command is written: the run's results file, "
                        "benchmarks.sh as it was, docs/benchmarks.md, ...")
    commit: str | None = None


class RunConfig(BaseModel):
    """One run: the task, its data, settings, backend and options, and where it writes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: Task
    about: str = ""
    data: Data = Data()
    settings: dict[str, str] = {}
    backend: str | None = None
    options: dict[str, Option] = {}
    script: str | None = None
    steps: list[list[str]] = []
    compare: list[Comparison] = []
    why_not: str | None = Field(None, description="record: why it is not run again")
    out: str | None = None
    recorded: Recorded | None = None

    @field_validator("settings")
    @classmethod
    def _known_settings(cls, settings: dict[str, str]) -> dict[str, str]:
        """A misspelt setting would silently not apply: refuse it."""
        unknown = [name for name in settings if not name.startswith("CONLI_")
                   or name.removeprefix("CONLI_").lower() not in Settings.model_fields]
        if unknown:
            raise ValueError(f"not conli settings: {', '.join(unknown)}")
        return settings

    def check(self) -> RunConfig:
        """Refuse a config whose task lacks what it needs, or has what another task takes."""
        needs = {"decide": bool(self.compare), "experiment": bool(self.script and self.steps),
                 "record": bool(self.why_not and self.recorded)}
        if not needs.get(self.task, True):
            raise ValueError({"decide": "decide needs [[compare]] tables",
                              "experiment": "experiment needs script and steps",
                              "record": "record needs why_not and [recorded]"}[self.task])
        if self.task != "experiment" and (self.script or self.steps):
            raise ValueError("script and steps are for task = \"experiment\"")
        if self.task != "decide" and self.compare:
            raise ValueError("[[compare]] tables are for task = \"decide\"")
        return self


def load(path: Path) -> RunConfig:
    """The config at ``path``; ``ConfigError`` naming the file for anything wrong in it."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        return RunConfig.model_validate(raw).check()
    except OSError as exc:
        raise ConfigError(f"cannot read the run config {path}: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, ValidationError, ValueError) as exc:
        raise ConfigError(f"{path} is not a valid run config: {exc}") from exc


def digest(path: Path) -> str:
    """SHA-256 of the config file as written (the lock pins it)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def out_of(path: Path, config: RunConfig) -> Path:
    """Where the run writes: ``out``, else ``results/<name>`` beside the configs' folder."""
    if config.out:
        return Path(config.out)
    default = (path.parent.parent / "results" / path.stem).absolute()
    here = Path.cwd()
    return default.relative_to(here) if default.is_relative_to(here) else default


def argv(path: Path, config: RunConfig) -> list[list[str]]:
    """The command(s) the run is, as a shell would be given them (no environment)."""
    out = str(out_of(path, config))
    if config.task in COMMANDS:
        return [["conli", *COMMANDS[config.task], *_data(config), *_flags(config.options),
                 *(["--llm", config.backend] if config.backend else []), "--out", out]]
    if config.task == "decide":
        return [["conli", "eval", "decide", str(path), "--out", out]]
    if config.task == "experiment":
        return [["python", str(config.script), *[out if a == "{out}" else a for a in step]]
                for step in config.steps]
    return []


def command(path: Path, config: RunConfig) -> str:
    """The run as shell lines, each with the settings it sets in front."""
    env = " ".join(f"{name}={shlex.quote(value)}" for name, value in config.settings.items())
    return "\n".join(" ".join(filter(None, [env, shlex.join(line)]))
                     for line in argv(path, config))


def dry_run(path: Path, config: RunConfig) -> str:
    """What ``conli eval run --dry-run`` prints: the command now, and as it was recorded."""
    lines = [f"# {path}: {config.task}" + (f" ({config.about})" if config.about else "")]
    lines.append(command(path, config) if config.task != "record"
                 else f"# not run again: {config.why_not}")
    if config.recorded:
        at = f" at {config.recorded.commit[:12]}" if config.recorded.commit else ""
        lines.append(f"# recorded{at} ({config.recorded.source}):")
        lines += [f"#   {line}" for line in config.recorded.command.splitlines()]
    return "\n".join(lines) + "\n"


def _data(config: RunConfig) -> list[str]:
    data = config.data
    files = "--cases" if config.task == "injection" else "--file"
    pairs: list[tuple[str, Any]] = [
        *[("--dataset", name) for name in data.sets], *[(files, f) for f in data.files],
        ("--format", data.format), ("--data-dir", data.data_dir), ("--limit", data.limit),
        ("--seed", data.seed)]
    return [word for flag, value in pairs if value is not None for word in (flag, str(value))]


def _flags(options: dict[str, Option]) -> list[str]:
    """``--name value`` for each option; true is the bare flag, false leaves it out."""
    words: list[str] = []
    for name, value in options.items():
        if value is False:
            continue
        words.append(f"--{name}")
        if isinstance(value, list):
            words += [str(v) for v in value]
        elif value is not True:
            words.append(str(value))
    return words

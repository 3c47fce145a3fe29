"""What to run on one check: the plan, built once at a front door from the settings.

``Settings`` is what the deployment configures. A front door (``check``, batch, the
service, the stream, eval, the hook) turns it and its per-call choices (``RunOptions``:
the mode's steps, detectors, threshold, judge mode, deadline) into a ``Plan`` here, once,
and passes the plan down; nothing else copies ``Settings`` with changes. ``for_backend``
makes a plan concrete for a backend (``auto`` prompt and detector), once per checker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from conli import judges
from conli.agents.nli_prompts import resolve_nli_prompt
from conli.config import Settings
from conli.errors import ConfigError

if TYPE_CHECKING:
    from conli.backends.base import Backend

Mode = Literal["check", "rewrite", "judge"]
MODES: tuple[Mode, ...] = ("check", "rewrite", "judge")


class RunOptions(BaseModel):
    """Per-run choices over the deployment's settings; None: as configured.

    ``tuning`` names any other setting by its field name (an evaluation's ablation
    switches); it is validated as the setting is.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mitigate: bool | None = Field(default=None, description="rewrite flagged sentences")
    fix_coverage: bool | None = Field(
        default=None, description="add a sentence per uncovered point")
    judge: bool | None = Field(default=None, description="score 1-5 after detection")
    judge_raw: bool | None = Field(default=None, description="also score the raw response")
    judge_mode: str | None = None  # a registered judge mode (conli.judges)
    detectors: list[str] | None = Field(default=None, description="detectors or presets, in order")
    threshold: float | None = Field(default=None, ge=0.0, le=1.0, description="the bar of `passed`")
    max_response_sentences: int | None = Field(default=None, ge=1)
    deadline_seconds: float | None = Field(default=None, gt=0, description="the check's deadline")
    tuning: Mapping[str, object] = Field(default_factory=dict)

    @classmethod
    def for_mode(cls, mode: Mode, *, with_judge: bool = False,
                 more: Mapping[str, object] | None = None) -> RunOptions:
        """The steps of a mode: ``check`` detects only, ``rewrite`` detects and rewrites.

        ``with_judge`` adds the rubric judge to either. ``check`` turns ``fix_coverage``
        off, so detect only never adds a sentence; ``rewrite`` keeps it as configured.
        ``judge`` changes no step: it scores in the configured ``judge_mode``.
        """
        steps: dict[str, object] = {}
        if mode != "judge":
            steps = {"mitigate": mode == "rewrite", "judge": with_judge}
        if mode == "check":
            steps["fix_coverage"] = False
        return options(**steps, **(more or {}))


def options(**given: object) -> RunOptions:
    """``RunOptions(**given)``; a bad value is a ``ConfigError`` naming the setting."""
    try:
        return RunOptions.model_validate(given)
    except ValidationError as exc:
        raise ConfigError(f"invalid setting: {_problems(exc)}") from exc


@dataclass(frozen=True)
class Plan:
    """What one check runs: the settings its steps read, and its deadline.

    ``settings`` are the deployment's with this run's choices applied; ``deadline`` is the
    seconds the whole check may take (None: no limit). A judge mode no one registered is a
    ``ConfigError`` naming those that are (``judges.get``), before any backend is built.
    """

    settings: Settings
    deadline: float | None

    def __post_init__(self) -> None:
        judges.get(self.settings.judge_mode)

    @property
    def detectors(self) -> list[str]:
        """The detectors and presets to run, in order."""
        return self.settings.detectors

    @property
    def threshold(self) -> float | None:
        """The bar a result's ``passed`` sets on its support score."""
        return self.settings.threshold

    def within(self, seconds: float) -> Plan:
        """The plan with at most ``seconds`` left of its deadline (a front door's own limit)."""
        if self.deadline is not None and self.deadline <= seconds:
            return self
        return dataclasses.replace(self, deadline=seconds)


def make_plan(settings: Settings | None = None, given: RunOptions | None = None) -> Plan:
    """The plan of a check: ``settings`` (default ``CONLI_*``) with ``given`` choices applied."""
    base = settings if settings is not None else Settings()
    if given is None:
        return Plan(base, base.check_deadline_seconds)
    chosen = given.model_dump(exclude_none=True, exclude={"tuning", "deadline_seconds"})
    changed = _changed(base, {**given.tuning, **chosen})
    deadline = given.deadline_seconds or changed.check_deadline_seconds
    return Plan(changed, deadline)


def plan_for(settings: Settings | None, mode: Mode | None = None, *, with_judge: bool = False,
             more: Mapping[str, object] | None = None) -> Plan:
    """``make_plan`` for a front door's mode (None: the settings' own steps) and choices.

    ``more`` holds further ``RunOptions`` fields (a request's detector, threshold, ...).
    """
    given = RunOptions.for_mode(mode, with_judge=with_judge, more=more) if mode is not None \
        else options(**more) if more else None
    return make_plan(settings, given)


def for_backend(plan: Plan, backend: Backend) -> Plan:
    """``plan`` made concrete for ``backend``: each ``auto`` becomes a choice.

    The NLI prompt version for the backend's capabilities; the ``auto`` detector becomes
    ``fused`` where the backend reads its own hidden states (the embedded model), else ``cot``.
    """
    settings = resolve(plan.settings, backend)
    return plan if settings is plan.settings else dataclasses.replace(plan, settings=settings)


def resolve(settings: Settings, backend: Backend) -> Settings:
    """``settings`` made concrete for ``backend`` (see ``for_backend``).

    ``ConfigError`` for semantic word scores on a backend without hidden states: refused
    here, before the check's model calls, rather than after them in the coverage step.
    """
    if settings.word_scores == "semantic" and not backend.capabilities.hidden_states:
        raise ConfigError(f"--word-scores semantic reads the model's hidden states, which "
                          f"{backend.name} does not serve; use lexical or the embedded model "
                          "(--llm local)")
    version = resolve_nli_prompt(settings, backend.capabilities)
    preset = "fused" if backend.capabilities.hidden_states else "cot"
    chosen = [preset if name == "auto" else name for name in settings.detectors]
    if version == settings.nli_prompt and chosen == settings.detectors:
        return settings
    return _changed(settings, {"nli_prompt": version, "detectors": chosen})


def adjusted(settings: Settings, **changes: object) -> Settings:
    """Deployment settings with ``changes`` (a worker's threads, an ablation), validated."""
    return _changed(settings, changes)


def _changed(settings: Settings, changes: Mapping[str, object]) -> Settings:
    """The one place ``Settings`` is copied with changes; each change validated as a setting."""
    if not changes:
        return settings
    unknown = sorted(set(changes) - set(Settings.model_fields))
    if unknown:
        raise ConfigError(f"invalid setting: unknown setting(s) {', '.join(unknown)}")
    try:
        checked = Settings.model_validate({**settings.model_dump(), **changes})
    except ValidationError as exc:
        raise ConfigError(f"invalid setting: {_problems(exc)}") from exc
    return settings.model_copy(update={name: getattr(checked, name) for name in changes})


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}"
                     for e in exc.errors())

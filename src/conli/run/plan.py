"""What to run on one check: the plan, built once at a front door from the settings.

``Settings`` is what the deployment configures. A front door (``check``, batch, the
service, the stream, eval, the hook) turns it and its per-call choices (``RunOptions``:
the mode's steps, detectors, threshold, judge mode, deadline) into a ``Plan`` here, once,
and passes the plan down; nothing else copies ``Settings`` with changes.
``agents.nli_prompts.for_backend`` makes a plan concrete for a backend (``auto`` prompt and
detector), once per checker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from conli.config import Settings
from conli.errors import ConfigError, validation_problems

Mode = Literal["check", "rewrite", "judge"]
MODES: tuple[Mode, ...] = ("check", "rewrite", "judge")


# what a judge-only run is: detection, no rewrite, and the judge on the response alone
JUDGE_ONLY_STEPS: dict[str, object] = {"mitigate": False, "fix_coverage": False, "judge": True,
                                       "judge_raw": False}


class RunOptions(BaseModel):
    """Per-run choices over the deployment's settings; None: as configured.

    The one model of a per-call option: a door whose caller sends options over the wire
    (the service, the proxy) takes only the fields its ``DOOR_OPTIONS`` allows (``allowed``).
    ``mode`` is the run's mode, set by the entrance that runs it (``for_mode``); ``tuning``
    names any other setting by its field name (an evaluation's ablation switches); it is
    validated as the setting is. ``detector`` (one name) is shorthand for ``detectors``, as
    the service's requests spell it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra={"examples": [
        {"detectors": ["cot"], "threshold": 0.7, "judge_mode": "grounded"},
    ]})

    mode: Mode | None = Field(default=None, description="check, rewrite or judge")
    mitigate: bool | None = Field(default=None, description="rewrite flagged sentences")
    fix_coverage: bool | None = Field(
        default=None, description="add a sentence per uncovered point")
    judge: bool | None = Field(default=None, description="score 1-5 after detection")
    judge_raw: bool | None = Field(default=None, description="also score the raw response")
    judge_mode: str | None = Field(
        default=None, description="a registered judge mode (conli.judges): grounded (from the "
        "sentence verdicts), rubric (bounded by them), both, or your own")
    detectors: list[str] | None = Field(
        default=None, description="detectors or presets to run, in order (cot, fast, hybrid, "
        "fused, auto, or a registered detector)")
    threshold: float | None = Field(default=None, ge=0.0, le=1.0, description="the bar of `passed`")
    max_response_sentences: int | None = Field(default=None, ge=1)
    deadline_seconds: float | None = Field(default=None, gt=0, description="the check's deadline")
    tuning: Mapping[str, object] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _one_detector(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "detector" in data:
            if "detectors" in data:
                raise ValueError("give detector (one name) or detectors (a list), not both")
            rest = {key: value for key, value in data.items() if key != "detector"}
            one = data["detector"]
            return {**rest, "detectors": None if one is None else [one]}
        return data

    @classmethod
    def for_mode(cls, mode: Mode, *, with_judge: bool = False,
                 more: Mapping[str, object] | None = None) -> RunOptions:
        """The steps of a mode: ``check`` detects only, ``rewrite`` detects and rewrites.

        ``with_judge`` (or ``judge`` in ``more``) adds the judge to either. ``check`` turns
        ``fix_coverage`` off, so detect only never adds a sentence; ``rewrite`` keeps it as
        configured. ``judge`` is detection and the judge only (``JUDGE_ONLY_STEPS``), in
        the configured ``judge_mode``; its run answers the judge's score alone
        (``JudgeOnlyResult``). ``more`` holds further choices (None: not given); one that
        names another mode, or a step the mode decides with another value, is a
        ``ConfigError`` naming it.
        """
        chosen = {name: value for name, value in (more or {}).items() if value is not None}
        if chosen.pop("mode", mode) != mode:
            raise ConfigError(f"options for the {mode} mode name another mode")
        if mode != "judge" and "judge" in chosen:
            with_judge = bool(chosen.pop("judge"))
        steps: dict[str, object] = dict(JUDGE_ONLY_STEPS) if mode == "judge" else {
            "mitigate": mode == "rewrite", "judge": with_judge}
        if mode == "check":
            steps["fix_coverage"] = False
        clash = sorted(name for name in steps.keys() & chosen.keys() if chosen[name] != steps[name])
        if clash:
            raise ConfigError(f"the {mode} mode decides {', '.join(clash)}; a request in it "
                              "cannot set them otherwise")
        return options(**{**chosen, **steps, "mode": mode})

    def in_mode(self, mode: Mode) -> RunOptions:
        """These options (a request's) run in ``mode``: its steps, the other choices kept."""
        return RunOptions.for_mode(mode, more=self.model_dump(include=set(self.chosen())))

    def chosen(self) -> frozenset[str]:
        """The fields given a value (what a door's allow-list is checked against)."""
        return frozenset(name for name in self.model_fields_set
                         if name != "tuning" or self.tuning)


Door = Literal["service", "proxy"]
# Which ``RunOptions`` fields a remote caller may choose per call, at the doors whose wire
# carries options: the service's bodies and the proxy's ``conli`` object. The door sets the
# others itself (its mode's steps, its sentence limit, its deadline); a caller naming one is
# refused (``allowed``). The other doors have no list to enforce: the command line's and
# batch's options are argparse's flags, the hook's a ``Settings`` from the program that owns
# the process, and a stream's wire carries none (the proxy's stream is checked as the proxy).
DOOR_OPTIONS: dict[Door, frozenset[str]] = {
    "service": frozenset({"detectors", "threshold", "judge_mode"}),
    "proxy": frozenset({"detectors", "threshold", "judge", "judge_mode"}),  # a body's conli
}


def allowed(door: Door, given: Mapping[str, object] | RunOptions) -> None:
    """Refuse a per-call option ``door`` does not take from its caller (``ConfigError``).

    ``given`` is the caller's options, as a model or as the raw mapping it sent (whose
    ``detector`` is ``detectors``' one-name shorthand).
    """
    names = given.chosen() if isinstance(given, RunOptions) else frozenset(
        "detectors" if name == "detector" else str(name) for name in given)
    barred = sorted(names - DOOR_OPTIONS[door])
    if barred:
        takes = sorted("detector" if name == "detectors" else name  # as the wire spells it
                       for name in DOOR_OPTIONS[door])
        shown = ", ".join(repr(name) for name in barred)
        raise ConfigError(f"option {shown} cannot be set per request; the options are "
                          f"{', '.join(takes)}")


def options(**given: object) -> RunOptions:
    """``RunOptions(**given)``; a bad value is a ``ConfigError`` naming the setting."""
    try:
        return RunOptions.model_validate(given)
    except ValidationError as exc:
        raise invalid_setting(exc) from exc


@dataclass(frozen=True)
class Plan:
    """What one check runs: the settings its steps read, its deadline and its mode.

    ``settings`` are the deployment's with this run's choices applied; ``deadline`` is the
    seconds the whole check may take (None: no limit); ``mode`` is the front door's
    (None: the settings' own steps). A ``judge`` plan's run answers the judge's score alone.
    """

    settings: Settings
    deadline: float | None
    mode: Mode | None = None

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
    chosen = given.model_dump(exclude_none=True, exclude={"tuning", "deadline_seconds", "mode"})
    changed = _changed(base, {**given.tuning, **chosen})
    deadline = given.deadline_seconds or changed.check_deadline_seconds
    return Plan(changed, deadline, given.mode)


def applied(plan: Plan, given: RunOptions) -> Plan:
    """``plan`` with a request's further choices; its deadline and mode stay unless given."""
    if not given.chosen():
        return plan
    settings = make_plan(plan.settings, given).settings
    return Plan(settings, given.deadline_seconds or plan.deadline, given.mode or plan.mode)


def plan_for(settings: Settings | None, mode: Mode | None = None, *, with_judge: bool = False,
             more: Mapping[str, object] | None = None) -> Plan:
    """``make_plan`` for a front door's mode (None: the settings' own steps) and choices.

    ``more`` holds further ``RunOptions`` fields (a request's detector, threshold, ...).
    """
    given = RunOptions.for_mode(mode, with_judge=with_judge, more=more) if mode is not None \
        else options(**more) if more else None
    return make_plan(settings, given)


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
        raise invalid_setting(exc) from exc
    return settings.model_copy(update={name: getattr(checked, name) for name in changes})


def invalid_setting(exc: ValidationError) -> ConfigError:
    """A setting's validation failure as the ``ConfigError`` that names each bad setting."""
    return ConfigError(f"invalid setting: {validation_problems(exc.errors(), 'settings')}")

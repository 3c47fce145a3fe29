"""The per-run plan: built once from the settings and a front door's choices."""

from __future__ import annotations

import pytest

from conli.config import Settings
from conli.errors import ConfigError
from conli.run.plan import RunOptions, make_plan, options, plan_for


def test_no_choices_is_the_settings_themselves() -> None:
    settings = Settings(check_deadline_seconds=30)
    plan = make_plan(settings)
    assert plan.settings is settings and plan.deadline == 30


@pytest.mark.parametrize(("mode", "mitigate", "judge", "fix_coverage"), [
    ("check", False, False, False), ("rewrite", True, False, True), ("judge", False, True, False),
])
def test_a_mode_chooses_the_steps(mode: str, mitigate: bool, judge: bool,
                                  fix_coverage: bool) -> None:
    settings = Settings(fix_coverage=True)
    chosen = plan_for(settings, mode).settings  # type: ignore[arg-type]
    assert (chosen.mitigate, chosen.judge, chosen.fix_coverage) == (mitigate, judge, fix_coverage)
    assert plan_for(settings, mode).settings == chosen  # type: ignore[arg-type]
    assert settings.mitigate and settings.judge  # the deployment's settings are not changed


def test_a_bad_choice_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="threshold"):
        options(threshold=1.5)
    with pytest.raises(ConfigError, match="max_reasks"):
        make_plan(Settings(), options(tuning={"max_reasks": 9}))
    with pytest.raises(ConfigError, match="unknown setting"):
        make_plan(Settings(), options(tuning={"no_such_setting": 1}))


def test_the_deadline_only_shrinks_within_a_front_doors_limit() -> None:
    plan = make_plan(Settings(check_deadline_seconds=10))
    assert plan.within(20) is plan
    assert plan.within(5).deadline == 5 and plan.within(5).settings is plan.settings
    assert make_plan(Settings(check_deadline_seconds=None)).within(3).deadline == 3
    assert make_plan(Settings(), RunOptions(deadline_seconds=7)).deadline == 7


def test_settings_are_copied_with_changes_only_in_the_plan_builder() -> None:
    """No module but run/plan.py calls ``<...settings>.model_copy``: per-run choices: a plan."""
    import ast
    from pathlib import Path

    import conli

    copies = []
    for path in Path(conli.__file__).parent.rglob("*.py"):
        if path.name == "plan.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "model_copy":
                receiver = ast.unparse(node.func.value)
                if receiver.lower().endswith("settings"):
                    copies.append(f"{path.name}:{node.lineno} {receiver}")
    assert copies == []


def test_the_run_room_knows_no_argparse() -> None:
    """The command line's flags are ``cli.flags``'; the run room is every door's, not argv's."""
    import ast
    from pathlib import Path

    import conli.run

    imported = {path.name: alias.name for path in Path(conli.run.__file__).parent.glob("*.py")
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in (node.names if isinstance(node, ast.Import)
                              else [ast.alias(node.module or "")])
                if alias.name.split(".")[0] == "argparse"}
    assert imported == {}


def test_judge_is_a_mode_of_the_plan_with_its_own_steps() -> None:
    plan = plan_for(Settings(mitigate=True, judge_raw=True, fix_coverage=True), "judge")
    chosen = plan.settings
    assert plan.mode == "judge"
    assert (chosen.mitigate, chosen.judge, chosen.judge_raw, chosen.fix_coverage) == (
        False, True, False, False)
    assert plan_for(Settings(), "check").mode == "check" and make_plan(Settings()).mode is None


def test_a_request_applies_over_a_plan_keeping_its_deadline_and_mode() -> None:
    from conli.run.plan import applied

    plan = plan_for(Settings(check_deadline_seconds=9), "judge")
    assert applied(plan, RunOptions()) is plan
    more = applied(plan, options(detector="cot", threshold=0.5))
    assert more.mode == "judge" and more.deadline == 9
    assert more.settings.detectors == ["cot"] and more.settings.threshold == 0.5


def test_each_door_takes_only_its_allowed_options() -> None:
    from conli.run.plan import DOOR_OPTIONS, allowed

    allowed("service", {"detector": "cot", "threshold": 0.5, "judge_mode": "rubric"})
    with pytest.raises(ConfigError, match="'mitigate'"):
        allowed("service", options(mitigate=True))
    with pytest.raises(ConfigError, match="'tuning'"):
        allowed("service", {"tuning": {"max_reasks": 1}})
    assert all(DOOR_OPTIONS[door] <= set(RunOptions.model_fields) for door in DOOR_OPTIONS)


def test_a_checker_prepares_each_distinct_plan_once() -> None:
    from conli.backends.fake import ScriptedBackend
    from conli.pipeline import Checker

    with Checker(Settings(judge=False), backend=ScriptedBackend()) as checker:
        first = checker.prepare(plan_for(checker.settings, "check"))
        again = checker.prepare(plan_for(checker.settings, "check").within(3))
        assert again.deps is first.deps and again.plan.deadline == 3  # the deadline per call
        other = checker.prepare(plan_for(checker.settings, "check", more={"judge_mode": "rubric"}))
        assert other.deps is not first.deps
        assert checker.prepare(checker.plan) is checker.prepare()


def test_a_mode_sets_its_steps_over_a_requests_other_choices() -> None:
    chosen = options(judge=True, threshold=0.5).in_mode("check")
    assert (chosen.mode, chosen.mitigate, chosen.judge, chosen.threshold) == (
        "check", False, True, 0.5)
    with pytest.raises(ConfigError, match="decides mitigate"):
        options(mitigate=True).in_mode("judge")
    with pytest.raises(ConfigError, match="another mode"):
        options(mode="judge").in_mode("rewrite")


def test_each_mode_has_a_typed_entrance_and_run_refuses_to_guess_one() -> None:
    from conli.backends.fake import ScriptedBackend
    from conli.models import CheckResult
    from conli.pipeline import Checker
    from conli.run.doors import JudgeOnlyResult
    from conli.run.request import RunRequest
    from tests.support.responders import rule_responder

    backend = ScriptedBackend(responder=rule_responder(bad=("1963",)))
    with Checker(Settings(word_scores="off"), backend=backend) as checker:
        request = RunRequest.of("It opened in 1962.", "It opened in 1963.",
                                limits=checker.settings)
        checked, rewritten = checker.run_check(request), checker.run_rewrite(request)
        assert isinstance(checked, CheckResult) and checked.mitigation.status == "disabled"
        assert isinstance(rewritten, CheckResult) and rewritten.mitigation.status != "disabled"
        assert isinstance(checker.run_judge(request), JudgeOnlyResult)
        assert isinstance(checker.run(request), CheckResult)  # the plan's own steps
        with pytest.raises(ConfigError, match="run_judge"):
            checker.run(RunRequest(request.texts, options(mode="judge")))


def test_the_two_requests_old_name_still_works_with_a_warning() -> None:
    """``RunRequest`` (a check's) and ``CompletionRequest`` (a backend's) were both ``Request``."""
    from conli import backends
    from conli.backends import base
    from conli.run import request

    for module, new in ((request, request.RunRequest), (base, base.CompletionRequest),
                        (backends, base.CompletionRequest)):
        with pytest.warns(DeprecationWarning, match=new.__name__):
            assert module.Request is new  # type: ignore[attr-defined]

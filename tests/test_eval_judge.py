"""Judge evaluation: rule-based variants, task plan, residuals, progression and the plot."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from conli.config import Settings
from conli.evaluation import judge_eval as je
from conli.evaluation.loaders import Example
from conli.training import perturb
from tests.eval_fakes import backend as fake_backend


def rng() -> random.Random:
    return random.Random(0)


def test_swap_number_keeps_form_and_skips_years() -> None:
    out = perturb.swap_number("In 2019 the hotel had 1,200 rooms.", rng())
    assert out is not None and out.startswith("In 2019 the hotel had ") and "1,200" not in out
    assert "," in out.split("had ")[1]
    assert perturb.swap_number("Opened in 2019.", rng()) is None


def test_swap_date_moves_month_or_year() -> None:
    out = perturb.swap_date("It opened on 3 May.", rng())
    assert out is not None and "May" not in out and out.startswith("It opened on 3 ")
    year = perturb.swap_date("It opened in 2019.", rng())
    assert year is not None and "2019" not in year


def test_negate_adds_or_removes_not() -> None:
    negated = perturb.negate("The museum is open on Sundays.", rng())
    assert negated == "The museum is not open on Sundays."
    assert perturb.negate("He did not win the race.", rng()) == "He did win the race."
    assert perturb.negate("He didn't win.", rng()) == "He did win."
    assert perturb.negate("Rain fell.", rng()) is None


def test_swap_entity_uses_a_same_type_entity_from_the_source() -> None:
    out = perturb.swap_entity("Alice met the mayor.", [("Alice", "PERSON")],
                         [("Alice", "PERSON"), ("Bob", "PERSON"), ("Paris", "GPE")], rng())
    assert out == "Bob met the mayor."


def test_extrinsic_appends_a_clause_before_the_full_stop() -> None:
    out = perturb.extrinsic_variant("The bridge opened.", rng())
    clause = out.removeprefix("The bridge opened, ").removesuffix(".")
    assert clause in perturb.EXTRINSIC_CLAUSES and out.endswith(".")


def _item() -> je.JudgeItem:
    gold = [f"Fact {i} is true." for i in range(5)]
    return je.JudgeItem("x", " ".join(gold), gold, [f"Fact {i} is false." for i in range(5)],
                        [f"Fact {i} is true, and more." for i in range(5)])


def test_plan_tasks_builds_residual_tasks_and_nested_progressions() -> None:
    tasks = je.plan_tasks([_item()], seed=1)
    kinds = [t.task for t in tasks]
    assert kinds.count("gold_full") == 1 and kinds.count("intrinsic_sentence") == 1
    intrinsic = [t for t in tasks if t.task == "progression_intrinsic"]
    assert [t.pct for t in intrinsic] == [20, 40, 60, 80, 100]
    assert [t.text.count("false") for t in intrinsic] == [1, 2, 3, 4, 5]
    assert intrinsic[-1].text == " ".join(f"Fact {i} is false." for i in range(5))


def _scored(task: str, score: int | None, pct: int | None = None, expected: int | None = None,
            item: str = "x") -> je.Scored:
    return je.Scored(je.Task(item, task, "t", expected, pct), "reasoning", score, "judge_rubric.v1")


def test_residual_table_by_hand() -> None:
    scored = [_scored("gold_full", 5, 0, 5), _scored("gold_sentence", 3, None, 5),
              _scored("intrinsic_sentence", 2, None, 1),
              _scored("extrinsic_sentence", None, None, 1)]
    table = je.residual_table(scored)["reasoning"]
    assert table["gold_sentence"]["residual"] == 2
    assert table["intrinsic_sentence"]["residual"] == 1
    assert table["extrinsic_sentence"] == {"n": 1, "unverified": 1, "residual": None,
                                           "residual_unverified_as_4": 4, "mean_score": None}
    assert table["all"]["residual"] == pytest.approx(1.0)  # (0 + 2 + 1) / 3
    assert table["all"]["residual_unverified_as_4"] == pytest.approx(7 / 4)


def test_progression_means_and_delta_per_step() -> None:
    scored = [_scored("gold_full", 5, 0, 5, "a"), _scored("gold_full", 4, 0, 5, "b")]
    for item, scores in (("a", [4, 3, 2, 1, 1]), ("b", [4, 3, 3, 2, None])):
        scored += [_scored("progression_intrinsic", s, p, None, item)
                   for s, p in zip(scores, (20, 40, 60, 80, 100), strict=True)]
    row = je.progression(scored)["reasoning"]["intrinsic"]
    assert row["mean_score"] == {0: 4.5, 20: 4, 40: 3, 60: 2.5, 80: 1.5, 100: 1}
    assert row["delta_per_step"] == pytest.approx((1 - 4.5) / 5)  # -0.70, the seed's table 4 form
    assert row["unverified"][100] == 1 and row["items"] == 2


def test_end_to_end_with_a_scripted_judge(tmp_path: Path) -> None:
    source = "The pier opened in 1921. It is 400 metres long. Boats leave every 2 hours. " \
             "The cafe is open in May. Tickets cost 5 euros."
    example = Example("e", source, source, False, "d")
    split = lambda text: re.split(r"(?<=\.)\s+", text)  # noqa: E731
    items = je.build_items([example], split, None, sentences=5, limit=None, seed=0)
    assert len(items) == 1 and all(v is not None for v in items[0].intrinsic)
    tasks = je.plan_tasks(items, seed=0)
    settings = Settings(llm="local")
    scored = [s for mode in ("reasoning", "score_only") for s in je.score_tasks(
        fake_backend(), items, tasks, je.judge_mode_settings(mode, settings), mode)]
    assert {s.template for s in scored} == {"judge_rubric.v1", "judge_rubric_score_only.v1"}
    residuals = je.residual_table(scored)
    assert residuals["reasoning"]["gold_full"]["residual"] == 0
    assert residuals["reasoning"]["intrinsic_sentence"]["residual"] == 0  # string-match judge: 1
    progress = je.progression(scored)
    assert progress["score_only"]["extrinsic"]["mean_score"][0] == 5
    assert progress["reasoning"]["extrinsic"]["mean_score"][100] == 1
    assert progress["reasoning"]["intrinsic"]["delta_per_step"] == pytest.approx(-0.8)
    pytest.importorskip("matplotlib")
    png = je.plot_progression(progress, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_three_sentence_progressions_report_the_slope_per_20_percent() -> None:
    scored = [_scored("gold_full", 5, 0, 5, "a")]
    scored += [_scored("progression_extrinsic", s, p, None, "a")
               for s, p in ((3, 33), (2, 67), (1, 100))]
    row = je.progression(scored)["reasoning"]["extrinsic"]
    assert row["delta_per_step"] == pytest.approx((1 - 5) / 5)  # same slope as 5 sentences


def test_targets_and_intervals_over_documents() -> None:
    scored = []
    for n, (gold, full) in enumerate([(5, 1), (5, 2), (4, 3), (5, 1)]):
        item = f"d{n}"
        scored += [_scored("gold_full", gold, 0, 5, item),
                   _scored("progression_intrinsic", full, 100, None, item)]
    targets = je.targets(scored)["reasoning"]
    assert targets["gold_scored_5"] == 0.75 and targets["all_hallucinated_at_most_2"] == 0.75
    interval = je.bootstrap_intervals(scored, seed=0, resamples=200)["reasoning"]
    low, high = interval["delta_intrinsic"]
    point = je.progression(scored)["reasoning"]["intrinsic"]["delta_per_step"]
    assert low <= point <= high and low < high


def test_grounded_mode_scores_from_the_verdicts(tmp_path: Path) -> None:
    source = "The pier opened in 1921. It is 400 metres long. Boats leave every 2 hours."
    example = Example("e", source, source, False, "d")
    split = lambda text: re.split(r"(?<=\.)\s+", text)  # noqa: E731
    items = je.build_items([example, example], split, None, sentences=3, limit=None, seed=0)
    assert len(items) == 1  # one item a document
    tasks = je.plan_tasks(items, seed=0)
    backend = fake_backend()
    scored = je.score_grounded(backend, items, tasks, Settings(llm="local"), reasoning_items=1)
    by_task = {(s.task.task, s.task.pct): s for s in scored}
    assert by_task[("gold_full", 0)].score == 5
    assert by_task[("progression_extrinsic", 100)].score == 1  # every sentence unsupported
    assert by_task[("gold_full", 0)].reasoning_status == "checked"
    assert by_task[("progression_extrinsic", 33)].reasoning_status is None  # score only
    assert {s.mode for s in scored} == {"grounded"}


def test_stored_predictions_give_grounded_scores(tmp_path: Path) -> None:
    from conli.pipeline import Checker

    checker = Checker(Settings(llm="local", detectors=["cot"], mitigate=False, judge=False),
                      fake_backend())
    source = "The pier opened in 1921. It is 400 metres long."
    rows = []
    for n, (response, gold) in enumerate([(source, False), ("The pier opened in 1931.", True)]):
        result = checker.check(source, response)
        rows.append(json.dumps({"example_id": f"x{n}", "dataset": "d", "gold": gold,
                                "result": result.model_dump(mode="json")}))
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(rows) + "\n")
    assert je.stored_grounded_scores(path) == [("x0", "d", False, 5), ("x1", "d", True, 1)]

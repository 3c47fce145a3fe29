"""Judge evaluation: rule-based variants, task plan, residuals, progression and the plot."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from conli.config import Settings
from conli.evaluation import judge_eval as je
from conli.evaluation import judge_figures as jf
from conli.evaluation.loaders import Example
from conli.judges.grounded import Scale
from conli.training import perturb
from tests.support.eval_fakes import backend as fake_backend


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


def _scored(task: str, score: float | None, pct: int | None = None,
            expected: int | None = None, item: str = "x") -> je.Scored:
    return je.Scored(je.Task(item, task, "t", expected, pct), "rubric", score, "judge_rubric.v2")


def test_residual_table_by_hand() -> None:
    scored = [_scored("gold_full", 5, 0, 5), _scored("gold_sentence", 3, None, 5),
              _scored("intrinsic_sentence", 2, None, 1),
              _scored("extrinsic_sentence", None, None, 1)]
    table = jf.residual_table(scored)["rubric"]
    assert table["gold_sentence"]["residual"] == 2
    assert table["intrinsic_sentence"]["residual"] == 1
    assert table["extrinsic_sentence"] == {"n": 1, "unverified": 1, "residual": None,
                                           "residual_unverified_as_4": 4, "mean_score": None}
    assert table["all"]["residual"] == pytest.approx(1.0)  # (0 + 2 + 1) / 3
    assert table["all"]["residual_unverified_as_4"] == pytest.approx(7 / 4)


def test_progression_means_and_the_fitted_slope_per_step() -> None:
    scored = [_scored("gold_full", 5, 0, 5, "a"), _scored("gold_full", 5, 0, 5, "b")]
    for item in ("a", "b"):
        scored += [_scored("progression_intrinsic", 5 - 0.8 * step, 20 * step, None, item)
                   for step in range(1, 6)]
    scored.append(_scored("progression_intrinsic", None, 100, None, "c"))
    row = jf.progression(scored)["rubric"]["intrinsic"]
    assert row["mean_score"][0] == 5 and row["mean_score"][100] == pytest.approx(1)
    assert row["delta_per_step"] == pytest.approx(-0.8)  # a straight line: its slope
    assert row["unverified"][100] == 1


def test_items_of_three_to_five_sentences_share_one_slope() -> None:
    scored = [_scored("gold_full", 5, 0, 5, "three"), _scored("gold_full", 5, 0, 5, "five")]
    scored += [_scored("progression_extrinsic", 5 - 4 * p / 100, p, None, "three")
               for p in (33, 67, 100)]
    scored += [_scored("progression_extrinsic", 5 - 4 * p / 100, p, None, "five")
               for p in (20, 40, 60, 80, 100)]
    row = jf.progression(scored)["rubric"]["extrinsic"]
    assert row["delta_per_step"] == pytest.approx(-0.8)


def test_build_items_takes_three_to_five_sentences_one_a_document() -> None:
    long = " ".join(f"Fact {i} is true." for i in range(7))
    examples = [Example("a", long, long, False, "d"), Example("b", long, long, False, "d"),
                Example("c", "One. Two.", "One. Two.", False, "d")]
    split = lambda text: re.split(r"(?<=\.)\s+", text)  # noqa: E731
    items = je.build_items(examples, split, None, sentences=(3, 5), limit=None, seed=0)
    assert [len(i.gold) for i in items] == [5] and items[0].dataset == "d"


def test_the_rubric_judge_is_scored_end_to_end(tmp_path: Path) -> None:
    source = "The pier opened in 1921. It is 400 metres long. Boats leave every 2 hours. " \
             "The cafe is open in May. Tickets cost 5 euros."
    example = Example("e", source, source, False, "d")
    split = lambda text: re.split(r"(?<=\.)\s+", text)  # noqa: E731
    items = je.build_items([example], split, None, sentences=(3, 5), limit=None, seed=0)
    assert len(items) == 1 and all(v is not None for v in items[0].intrinsic)
    tasks = je.plan_tasks(items, seed=0)
    scored = je.score_rubric(fake_backend(), items, tasks, Settings(llm="local"))
    assert {s.template for s in scored} == {"judge_rubric.v2"}
    residuals = jf.residual_table(scored)
    assert residuals["rubric"]["gold_full"]["residual"] == 0
    assert jf.targets(scored)["rubric"]["below_5_untied"] == 0  # it names what it deducts for
    areas = jf.auroc_by_set(scored)["rubric"]
    assert areas["d"]["auroc"] == areas["all"]["auroc"] == 1.0 and areas["all"]["n"] == len(tasks)
    assert residuals["rubric"]["intrinsic_sentence"]["residual"] == 0  # string-match judge: 1
    progress = jf.progression(scored)
    assert progress["rubric"]["extrinsic"]["mean_score"][100] == 1
    assert -0.8 <= progress["rubric"]["intrinsic"]["delta_per_step"] < -0.7  # rounded steps
    pytest.importorskip("matplotlib")
    png = jf.plot_progression(progress, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_targets_and_intervals_over_documents() -> None:
    scored = []
    for n, (gold, full) in enumerate([(5, 1), (4.6, 2.4), (3.4, 3), (5, 1)]):
        item = f"d{n}"
        scored += [_scored("gold_full", gold, 0, 5, item),
                   _scored("progression_intrinsic", full, 100, None, item)]
    targets = jf.targets(scored)["rubric"]
    assert targets["gold_scored_5"] == 0.75 and targets["gold_at_least_4"] == 0.75
    assert targets["all_hallucinated_at_most_2"] == 0.75
    interval = jf.bootstrap_intervals(scored, seed=0, resamples=200)["rubric"]
    low, high = interval["delta_intrinsic"]
    point = jf.progression(scored)["rubric"]["intrinsic"]["delta_per_step"]
    assert low <= point <= high and low < high
    low, high = interval["gold_at_least_4"]
    assert low <= 0.75 <= high


@pytest.mark.slow
def test_the_auroc_has_an_interval_per_set_over_that_sets_documents() -> None:
    from dataclasses import replace

    scored = []
    for n, (dataset, gold, wrong) in enumerate([("a", 5, 1), ("a", 4, 2), ("a", 2, 3),
                                                ("a", 5, 5), ("b", 5, 1), ("b", 4, 1)]):
        scored += [replace(_scored("gold_full", gold, 0, 5, f"d{n}"), dataset=dataset),
                   replace(_scored("progression_extrinsic", wrong, 100, None, f"d{n}"),
                           dataset=dataset)]
    interval = jf.bootstrap_intervals(scored, seed=0, resamples=300)["rubric"]
    areas = jf.auroc_by_set(scored)["rubric"]
    low, high = interval["auroc_a"]
    assert low <= areas["a"]["auroc"] <= high and low < high  # a mixed set: a real spread
    assert interval["auroc_b"] == [1.0, 1.0]  # b's documents alone: always ranked right
    low, high = interval["auroc_all"]
    assert low <= areas["all"]["auroc"] <= high


def test_a_rubric_score_below_5_with_no_error_tied_is_counted() -> None:
    from dataclasses import replace

    rows = [replace(_scored("gold_full", 2.2, 0, 5), tied_errors=0),
            replace(_scored("gold_full", 3.1, 0, 5), tied_errors=1),
            replace(_scored("gold_full", 4.7, 0, 5), tied_errors=0)]  # rounds to 5: no deduction
    assert jf.targets(rows)["rubric"]["below_5_untied"] == 0.5


def _evidence(dataset: str, item: str, task: str, pct: int | None, value: float,
              expected: int | None = None) -> je.Scored:
    return je.Scored(je.Task(item, task, "t", expected, pct), "grounded", None,
                     "judge_grounded.v1", dataset, evidence=value)


def test_the_grounded_scale_is_monotone_and_scored_leave_one_dataset_out() -> None:
    rows = []
    for dataset, noise in (("a", 0.0), ("b", 0.05), ("c", 0.1)):
        for n in range(4):
            item = f"{dataset}{n}"
            rows.append(_evidence(dataset, item, "gold_full", 0, noise, 5))
            rows += [_evidence(dataset, item, "progression_intrinsic", p, p / 100 + noise)
                     for p in (33, 67, 100)]
    scale = je.fit_scale(rows)
    assert list(scale.y) == sorted(scale.y, reverse=True) and scale(0.0) == 5.0
    shipped = Scale("shipped", (0.0, 1.0), (1.0, 1.0))  # scores everything 1: easy to spot
    scored = je.lodo_grounded(rows, shipped)
    assert len(scored) == len(rows) and all(s.score is not None for s in scored)
    assert not any(s.template.endswith("+shipped") for s in scored)
    held_out_a = [s for s in scored if s.dataset == "a"]
    # a's scale never saw a: with a's lower evidence it still scores gold texts 5
    assert all(s.score == 5 for s in held_out_a if s.task.task == "gold_full")
    row = jf.progression(scored)["grounded"]["intrinsic"]
    assert row["delta_per_step"] < -0.5
    alone = je.lodo_grounded([r for r in rows if r.dataset == "a"], shipped)
    assert {s.score for s in alone} == {1.0}  # one dataset: nothing held out to fit on
    assert all(s.template.endswith("+shipped") for s in alone)


def test_grounded_evidence_comes_from_the_detectors(tmp_path: Path) -> None:
    source = "The pier opened in 1921. It is 400 metres long. Boats leave every 2 hours."
    example = Example("e", source, source, False, "d")
    split = lambda text: re.split(r"(?<=\.)\s+", text)  # noqa: E731
    items = je.build_items([example, example], split, None, sentences=(3, 5), limit=None,
                           seed=0)
    assert len(items) == 1  # one item a document
    tasks = je.plan_tasks(items, seed=0)
    scored = je.score_documents(fake_backend(), [(items, tasks)],
                                Settings(llm="local", detectors=["cot"]), ["grounded"],
                                reasoning_items=1).evidence
    by_task = {(s.task.task, s.task.pct): s for s in scored}
    assert by_task[("gold_full", 0)].evidence == 0
    assert by_task[("progression_extrinsic", 100)].evidence == 1.0  # all contradicted
    assert by_task[("progression_extrinsic", 100)].reasoning_status == "checked"
    assert by_task[("progression_extrinsic", 33)].reasoning_status is None  # evidence only


def test_stored_predictions_give_grounded_scores(tmp_path: Path) -> None:
    from conli.judges.grounded import load_scale
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
    scale = load_scale()
    stored = je.stored_grounded_scores(path, scale)
    assert [(r[0], r[2]) for r in stored] == [("x0", False), ("x1", True)]
    assert stored[0][3] == 5 and stored[1][3] < stored[0][3]


@pytest.mark.slow
def test_documents_are_scored_in_turn_across_sets_and_a_budget_stops_between_them() -> None:
    source = "The pier opened in 1921. It is 400 metres long. Boats leave every 2 hours."
    split = lambda text: re.split(r"(?<=\.)\s+", text)  # noqa: E731
    plans = []
    for dataset in ("a", "b"):
        examples = [Example(f"{n}", f"{source} Doc {n}.", source, False, dataset)
                    for n in range(3)]  # the same ids in both sets (two user files may)
        items = je.build_items(examples, split, None, sentences=(3, 5), limit=None, seed=0)
        plans.append((items, je.plan_tasks(items, seed=0)))
    settings = Settings(llm="local", detectors=["cot"])
    whole = je.score_documents(fake_backend(), plans, settings, je.MODES, reasoning_items=1)
    docs = [(i.dataset, i.id) for i in whole.items]
    assert docs == [("a", "0"), ("b", "0"), ("a", "1"), ("b", "1"), ("a", "2"), ("b", "2")]
    assert whole.planned == 6 and len(whole.rubric) == len(whole.evidence) == sum(
        len(tasks) for _, tasks in plans)
    assert whole.detectors[:2] == ["sentence_nli", "entity_nli"]  # the `cot` preset, resolved
    assert "cot" not in whole.detectors
    assert [s.task for s in whole.rubric if s.dataset == "a"] == plans[0][1]  # no b task mixed in
    reasoned = {(s.dataset, s.task.item) for s in whole.evidence
                if s.reasoning_status is not None}
    assert reasoned == {("a", "0"), ("b", "0")}  # the first item of each set
    ticks = iter(range(100))  # the clock reads 0, 1, 2 before three documents, then 3: stop
    cut = je.score_documents(fake_backend(), plans, settings, ["rubric"], reasoning_items=1,
                             deadline=2.5, clock=lambda: next(ticks))
    assert [(i.dataset, i.id) for i in cut.items] == [("a", "0"), ("b", "0"), ("a", "1")]
    assert cut.detectors == []  # rubric only: no detector ran
    assert not cut.evidence and {(s.dataset, s.task.item) for s in cut.rubric} == {
        ("a", "0"), ("b", "0"), ("a", "1")}


def test_the_auroc_per_set_ranks_gold_against_wrong_texts_and_counts_unverified() -> None:
    rows = [_scored("gold_full", 5, 0, 5), _scored("gold_sentence", 3, None, 5),
            _scored("intrinsic_sentence", 4, None, 1), _scored("progression_extrinsic", 1, 100),
            _scored("extrinsic_sentence", None, None, 1)]
    area = jf.auroc_by_set(rows)["rubric"]["all"]
    # wrong texts 4 and 1 against gold 5 and 3: three of four pairs ranked right
    assert area == {"auroc": 0.75, "n": 4, "unverified": 1}


def test_grounded_is_scored_as_shipped_beside_the_fit_that_would_replace_it() -> None:
    rows = [_evidence("a", "a0", "gold_full", 0, 0.0, 5),
            _evidence("a", "a0", "progression_intrinsic", 100, 1.0),
            _evidence("b", "b0", "gold_full", 0, 0.2, 5),
            _evidence("b", "b0", "progression_intrinsic", 100, 0.9)]
    shipped = Scale("grounded_scale.v0", (0.0, 1.0), (5.0, 1.0))
    scored = je.grounded_rows(rows, shipped)
    as_shipped = [(s.dataset, s.score) for s in scored if s.mode == "grounded"]
    assert as_shipped == [("a", 5.0), ("a", 1.0), ("b", 4.2), ("b", pytest.approx(1.4))]
    assert all(s.template.endswith("+grounded_scale.v0") for s in scored if s.mode == "grounded")
    fitted = [s for s in scored if s.mode == je.FITTED_MODE]
    assert len(fitted) == 4 and not any(s.template.endswith("+grounded_scale.v0")
                                        for s in fitted)
    # a scale fitted on judge documents would score its own training rows: the fit stands in
    own = Scale("grounded_scale.v1", (0.0, 1.0), (5.0, 1.0), {"fitted_on": "4 texts"})
    assert [s.score for s in je.grounded_rows(rows, own)] == \
        [s.score for s in je.lodo_grounded(rows, own)]
    assert {s.mode for s in je.grounded_rows(rows, own)} == {"grounded"}
    # one dataset: nothing held out to fit on, so no candidate beside what ships
    assert {s.mode for s in je.grounded_rows(rows[:2], shipped)} == {"grounded"}


@pytest.mark.slow
def test_the_paired_difference_ranks_both_modes_on_the_same_examples() -> None:
    # grounded ranks every hallucinated example below every faithful one; rubric backwards
    scores = [{"gold": g, "grounded": 1.0 if g else 5.0, "rubric": 5.0 if g else 1.0}
              for g in (True, False) * 6]
    scores.append({"gold": True, "grounded": 5.0, "rubric": None})  # left out of both
    gap = je.paired_difference(scores, resamples=200)
    assert gap["n"] == 12 and gap["difference"] == pytest.approx(1.0)
    assert gap["interval"] == pytest.approx([1.0, 1.0])
    level = je.paired_difference([{**s, "rubric": s["grounded"]} for s in scores[:12]],
                                 resamples=200)
    assert level["difference"] == 0 and level["interval"] == pytest.approx([0.0, 0.0])
    assert je.sample_aurocs(scores)["grounded_minus_rubric"]["n"] == 12

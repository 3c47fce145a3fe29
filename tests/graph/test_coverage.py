"""Coverage (seed 001): the points format, the tri-state per point, word scores, the fix."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from conli.backends.base import Message, TokenReading
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.errors import EmptyInputError, EncodingError, InputError, InputTooLargeError
from conli.evaluation import coverage_eval
from conli.evaluation.loaders import Example
from conli.graph import coverage
from conli.models import PointCheck
from conli.pipeline import Checker
from conli.run import inputs
from conli.signals import lexical
from conli.signals.align import semantic_word_scores
from tests.support.eval_fakes import respond as string_match

SOURCE = ("The pier opened in 1921. It is 400 metres long. Boats leave every 2 hours. "
          "Tickets cost 5 euros.")
POINTS = ["The pier opened in 1921.", "Boats leave every 2 hours.", "Tickets cost 5 euros."]
DROPS_ONE = "The pier opened in 1921. Tickets cost 5 euros."


def _checker(responder: Any = string_match, **settings: Any) -> tuple[Checker, ScriptedBackend]:
    backend = ScriptedBackend(responder=responder)
    chosen: dict[str, Any] = {"detectors": ["cot"], "mitigate": False, "judge": False,
                              **settings}
    return Checker(Settings(llm="local", **chosen), backend), backend


# --- the points format -------------------------------------------------------------------


def test_points_come_as_a_list_or_as_perspectives() -> None:
    assert inputs.parse_points(["a b", "c d"]) == {"points": ["a b", "c d"]}
    assert inputs.parse_points({"pro": ["x"], "con": ["y", "z"]}) == {
        "pro": ["x"], "con": ["y", "z"]}
    assert inputs.read_points('["only one"]') == {"points": ["only one"]}


@pytest.mark.parametrize(("data", "error"), [
    ([], EmptyInputError), ({}, EmptyInputError), ("a point", InputError), ([3], EncodingError),
    (["ok", ""], EmptyInputError), (["bad \x07 bell"], EncodingError),
    (["lone \ud800"], EncodingError), ({"pro": []}, EmptyInputError), ({"pro": "x"}, InputError),
    (["p"] * (inputs.MAX_POINTS + 1), InputTooLargeError),
])
def test_bad_points_are_refused_with_a_clear_error(data: object, error: type[Exception]
                                                   ) -> None:
    with pytest.raises(error):
        inputs.parse_points(data)


def test_points_that_are_not_json_name_the_problem() -> None:
    with pytest.raises(InputError, match="not valid JSON"):
        inputs.read_points("[unclosed")


# --- detection ---------------------------------------------------------------------------


def test_a_response_that_drops_one_point_reports_exactly_that_point() -> None:
    checker, _ = _checker()
    result = checker.check(SOURCE, DROPS_ONE, points=POINTS)
    assert result.coverage is not None
    assert [p.verdict for p in result.coverage.points] == ["covered", "uncovered", "covered"]
    assert result.coverage.verdict == "uncovered"
    assert [p.sentence for p in result.coverage.points] == [0, None, 1]
    missing = result.coverage.points[1]
    assert {w.text: w.score for w in missing.words} == {
        "Boats": 1.0, "leave": 1.0, "2": 1.0, "hours": 1.0}


def test_nli_decides_over_word_overlap_and_perspectives_take_the_worst() -> None:
    checker, _ = _checker()
    result = checker.check(SOURCE, DROPS_ONE, points={"pro": POINTS[:1], "con": POINTS[1:]})
    assert result.coverage is not None
    checks = [c.detector for p in result.coverage.points for c in p.checks]
    assert set(checks) == {"coverage_nli"}  # coverage_overlap was superseded
    by_name = {p.name: p.verdict for p in result.coverage.perspectives}
    assert by_name == {"pro": "covered", "con": "uncovered"}


def test_word_overlap_alone_scores_recall() -> None:
    checker, _ = _checker(detectors=["sentence_nli", "coverage_overlap"])
    result = checker.check(SOURCE, DROPS_ONE, points=POINTS)
    assert result.coverage is not None
    assert [p.score for p in result.coverage.points] == [1.0, 0.0, 1.0]
    assert result.coverage.score == 0.0  # the minimum over the one perspective


def test_a_point_whose_check_fails_is_unverified_never_covered() -> None:
    def broken_for_points(messages: list[Message]) -> str:
        if "Boats" in messages[-1]["content"] and "<source>\nThe pier" in messages[-1][
                "content"] and "Tickets cost 5 euros.\n</source>" in messages[-1]["content"]:
            return "not json at all"
        return string_match(messages)

    checker, _ = _checker(broken_for_points, max_reasks=0)
    result = checker.check(SOURCE, DROPS_ONE, points=POINTS)
    assert result.coverage is not None
    point = result.coverage.points[1]
    assert point.verdict == "unverified" and point.checks[0].error
    assert result.coverage.verdict == "unverified"


def test_merge_rules_by_hand() -> None:
    def check(detector: str, verdict: str) -> PointCheck:
        return PointCheck(detector=detector, perspective="points", index=0, point="p",
                          verdict=verdict)  # type: ignore[arg-type]

    points = {"points": ["p"]}
    supersedes = {"b": frozenset({"a"})}
    merged = coverage.merge_points(points, [check("a", "uncovered"), check("b", "covered")],
                                   supersedes)
    assert merged[0].verdict == "covered"  # b supersedes a
    merged = coverage.merge_points(points, [check("a", "covered"), check("c", "unverified")],
                                   supersedes)
    assert merged[0].verdict == "unverified"
    assert coverage.merge_points(points, [], supersedes)[0].verdict == "unverified"


def test_without_points_coverage_is_a_score_only() -> None:
    checker, _ = _checker()
    result = checker.check(SOURCE, DROPS_ONE)
    assert result.coverage is not None
    assert result.coverage.verdict is None and result.coverage.points == []
    assert result.coverage.score == pytest.approx(lexical.recall(SOURCE, DROPS_ONE))
    assert 0 < result.coverage.score < 1


# --- word scores -------------------------------------------------------------------------


def test_lexical_word_scores_mark_words_the_source_lacks_by_stem() -> None:
    scores = lexical.word_scores("The piers opened yesterday, for 7 euros.", SOURCE)
    assert {w.text: w.score for w in scores} == {
        "piers": 0.0, "opened": 0.0, "yesterday": 1.0, "7": 1.0, "euros": 0.0}
    text = "The piers opened yesterday, for 7 euros."
    assert all(text[w.start:w.end] == w.text for w in scores)


def test_check_reports_word_scores_unless_off() -> None:
    checker, _ = _checker()
    result = checker.check(SOURCE, "The pier opened in 1931 for free.")
    assert {w.text for w in result.word_scores if w.score == 1.0} == {"1931", "free"}
    checker, _ = _checker(word_scores="off")
    assert checker.check(SOURCE, DROPS_ONE).word_scores == []


class _Reader(ScriptedBackend):
    """Hidden states behind our own contract: one axis per distinct lower-cased word."""

    def __init__(self) -> None:
        super().__init__(hidden_states=True)
        self.vocabulary: dict[str, int] = {}

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [self.vocabulary.setdefault(w.lower(), len(self.vocabulary))
                for w in re.findall(r"\w+", text)]

    def read_tokens(self, ids: list[int], score_from: int) -> TokenReading:
        import numpy as np

        states = np.zeros((len(ids), 64))
        for row, token in enumerate(ids):
            states[row, token % 64] = 1.0
        return TokenReading(states, np.zeros(0), np.zeros(0))


def test_semantic_word_scores_align_words_to_the_source() -> None:
    scores = semantic_word_scores(_Reader(), SOURCE, "The pier closed in 1921.")
    by_word = {w.text: w.score for w in scores}
    assert by_word["pier"] < 0.2 and by_word["1921"] < 0.2
    assert by_word["closed"] > 0.8
    assert all(w.method == "semantic" for w in scores)
    reader = _Reader()
    memo: dict[tuple[str, str], Any] = {}
    first = semantic_word_scores(reader, SOURCE, "The pier closed in 1921.", memo)
    reader.tokenize = reader.read_tokens = None  # type: ignore[assignment,method-assign]
    assert semantic_word_scores(reader, SOURCE, "The pier closed in 1921.", memo) == first


# --- the coverage fix --------------------------------------------------------------------


def _editor(messages: list[Message]) -> str:
    if "You add one missing point" in messages[0]["content"]:
        point = re.findall(r"<point>(.*?)</point>", messages[-1]["content"], re.S)[-1]
        return json.dumps({"sentence": point.strip()})
    return string_match(messages)


def test_fix_coverage_adds_the_missing_point_and_the_rewrite_passes() -> None:
    checker, _ = _checker(_editor, fix_coverage=True, mitigate=True)
    result = checker.check(SOURCE, DROPS_ONE, points=POINTS)
    (added,) = result.mitigation.added
    assert added.added and added.verdict == "supported" and added.covers == "covered"
    assert result.refined_text == DROPS_ONE + " Boats leave every 2 hours."
    again, _ = _checker()
    rechecked = again.check(SOURCE, result.refined_text, points=POINTS)
    assert rechecked.verdict == "supported"
    assert rechecked.coverage is not None and rechecked.coverage.verdict == "covered"


def test_an_added_sentence_the_source_does_not_support_is_not_added() -> None:
    checker, _ = _checker(_editor, fix_coverage=True, mitigate=True)
    result = checker.check(SOURCE, DROPS_ONE, points=[*POINTS, "Dogs swim free on Mondays."])
    assert [a.added for a in result.mitigation.added] == [True, False]
    assert "source does not support" in (result.mitigation.added[1].note or "")
    assert "Dogs" not in result.refined_text


# --- the synthetic set -------------------------------------------------------------------


def test_synthetic_cases_add_an_unused_point_or_remove_a_used_one() -> None:
    def split(text: str) -> list[str]:
        return re.split(r"(?<=\.)\s+", text.strip())

    summaries = ["The pier opened in 1921. It is 400 metres long. Boats leave every 2 hours.",
                 "Tickets for the ferry cost 5 euros each way. The pier opened in 1921."]
    examples = [Example(f"e{i}", SOURCE, s, False, "d") for i, s in enumerate(summaries)]
    (base,) = coverage_eval.build_bases(examples, split, limit=5, seed=0)
    assert base.unused == "Tickets for the ferry cost 5 euros each way."  # the near-copy is not
    base.paraphrased = [s.upper() for s in base.sentences]
    built = coverage_eval.cases([base], seed=0)
    kinds = [(c.kind, c.paraphrased) for c in built]
    assert kinds == [(k, p) for p in (False, True) for k in ("clean", "coverage", "hallucination")]
    covered = built[1]
    assert covered.points[-1] == base.unused and covered.added == 3
    removed = built[2]
    assert removed.removed is not None and len(removed.points) == 2
    assert base.sentences[removed.removed] not in removed.points
    halluc, labels = coverage_eval.hallucinated_words(
        removed, base.sentences, coverage_eval._starts(base.response, base.sentences))
    marked = {w.text for w, label in zip(halluc, labels, strict=True) if label}
    assert marked == {w[0] for w in lexical.words(base.sentences[removed.removed])}


def test_the_synthetic_evaluation_scores_both_methods() -> None:
    def split(text: str) -> list[str]:
        return re.split(r"(?<=\.)\s+", text.strip())

    base = coverage_eval.Base("b", "The pier opened in 1921. Boats leave every 2 hours.",
                              ["The pier opened in 1921.", "Boats leave every 2 hours."],
                              "Tickets for the ferry cost 5 euros.",
                              ["The pier opened in 1921.", "Boats leave every 2 hours."])
    backend = ScriptedBackend(responder=string_match)
    payload = coverage_eval.evaluate(backend, [base], split, Settings(llm="local"), seed=0)
    plain = payload["example_level"]["unparaphrased"]
    assert plain["coverage"] == {"overlap": 1.0, "nli": 1.0, "semantic": None}
    assert plain["hallucination"]["nli"] == 1.0
    read = coverage_eval.evaluate(None, [base], split, Settings(llm="local"), seed=0,
                                  reader=_Reader())
    for name in ("unparaphrased", "paraphrased"):  # one axis a word: alignment is exact
        assert read["example_level"][name]["coverage"]["semantic"] == 1.0
        assert read["example_level"][name]["hallucination"]["semantic"] == 1.0
        assert read["word_level"][name]["uncovered_words"]["semantic"] == 1.0
    scores = {(s["kind"], s["paraphrased"]): s for s in payload["scores"]}
    assert scores[("coverage", False)]["nli_hallucination"] is None  # not compared: not asked
    assert scores[("hallucination", False)]["nli_coverage"] is None

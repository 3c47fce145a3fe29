"""``conli.testing.assert_grounded``: a pytest assertion that says which sentence failed and why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tests.support.score_detector  # noqa: F401 - registers the scored detector
from conli import Checker, Settings, backends
from conli.backends.fake import ScriptedBackend
from conli.testing import assert_grounded
from tests.support import scripted

SOURCE = "The library opened in 1962. It lends books free of charge."


@pytest.fixture(scope="module")
def checker() -> Iterator[Checker]:
    """The scripted model: a claim holding FALSE is contradicted, with a reason."""
    with Checker(Settings(word_scores="off"), backend=scripted.backend()) as shared:
        yield shared


def test_a_grounded_answer_returns_its_result(checker: Checker) -> None:
    result = assert_grounded(SOURCE, "The library opened in 1962.", checker=checker)
    assert result.verdict == "supported" and result.passed
    assert result.judge_raw is None and result.judge_refined is None  # detect only


def test_the_failure_names_each_flagged_sentence_with_its_reasons(checker: Checker) -> None:
    with pytest.raises(AssertionError) as failed:
        assert_grounded(SOURCE, "The library opened in 1962. It charges FALSE two dollars.",
                        checker=checker)
    assert str(failed.value).splitlines() == [
        "the response is not grounded in its source: verdict hallucinated, support score 0.00 "
        "by verdict (no threshold: the verdict must be supported)",
        "  sentence 1 hallucinated: 'It charges FALSE two dollars.'",
        "    - contradiction: contradicted by the source Quoted, but not found in the source: "
        '"quoted source"',
    ]


def test_the_failure_says_the_threshold_and_lists_unverified_sentences(checker: Checker) -> None:
    scored = Settings(detectors=["scored"], word_scores="off")
    response = "It opened in 1962 score95. It lends books score60. It lends UNSURE records."
    with pytest.raises(AssertionError) as failed:
        assert_grounded(SOURCE, response, 0.7, checker=checker, settings=scored)
    assert str(failed.value).splitlines() == [
        "the response is not grounded in its source: verdict unverified, support score 0.60 by "
        "classifier (threshold 0.7 on every checked sentence's score)",
        "  sentence 1 scored 0.60, below threshold 0.7: 'It lends books score60.'",
        "  sentence 2 unverified: 'It lends UNSURE records.'",
        "    - could not be checked: None",
    ]
    passed = assert_grounded(SOURCE, "It opened in 1962 score95. It lends books score60.", 0.5,
                             checker=checker, settings=scored)
    assert passed.passed and passed.threshold == 0.5


def test_a_hallucinated_answer_fails_at_any_threshold(checker: Checker) -> None:
    scored = Settings(detectors=["scored"], word_scores="off")
    with pytest.raises(AssertionError, match=r"sentence 0 hallucinated \(score 0.45\)"):
        assert_grounded(SOURCE, "It lends books score45.", 0.1, checker=checker, settings=scored)


def test_without_a_checker_it_builds_one_and_closes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[ScriptedBackend] = []

    def factory(_arg: str, _settings: object) -> ScriptedBackend:
        built.append(scripted.backend())
        built[-1].close = lambda: built.append(built[-1])  # type: ignore[method-assign]
        return built[-1]

    monkeypatch.setitem(backends._REGISTRY, "helper", factory)
    result = assert_grounded(SOURCE, "It lends books free of charge.",
                             settings=Settings(llm="helper", word_scores="off"))
    assert result.passed and len(built) == 2  # built, then closed

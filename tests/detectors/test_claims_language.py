"""No rule is switched off by another text's language (issue 61).

A check reads its claims in the response's language, not in the language a guess reads
from the source: one chunk of Chinese among English chunks used to make the check ``zh``,
skip the unstated-entity rule for the whole check and cut the English answer as Chinese.
Numbers and dates are compared in every language; names where the NER reads the claim's
language, and a note names each sentence whose names were not compared. Names are compared
through their usual short forms, and a different number still fires.

Every model here is obedient: it entails every claim, so only the rules can flag.
"""

from __future__ import annotations

from typing import Any

import pytest

from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.graph import nodes
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.text.language import claims_language, detect_language, sentence_language
from tests.support.responders import rule_responder

ENGLISH = ["The Harbor Street Library opened in 1931 and has four floors.",
           "Its reading room seats 120 people, and membership is free."]
# about 90 characters of Chinese: the guess on the sources reads zh
CHINESE = ("哈伯街图书馆是该市最古老的公共图书馆之一，馆内藏有大量关于本地历史、"
           "航运和渔业的珍贵资料，每年吸引数千名研究人员和学生前来查阅，"
           "周末和节假日也对公众免费开放，欢迎大家前来参观。")


def _check(source: Any, response: str, **overrides: Any) -> CheckResult:
    settings = Settings(_env_file=None, detectors=["cot"], judge=False,  # type: ignore[call-arg]
                        mitigate=False, **overrides)
    with Checker(settings, backend=ScriptedBackend(responder=rule_responder())) as checker:
        return checker.check(source, response)


def test_a_chinese_chunk_does_not_switch_the_rule_off_for_an_english_answer(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [ENGLISH[0], CHINESE, ENGLISH[1]]
    assert 80 <= len(CHINESE) <= 100 and detect_language("\n\n".join(chunks)) == "zh"
    cut_in: list[str] = []
    real = nodes.split_response
    monkeypatch.setattr(nodes, "split_response", lambda text, nlp, *, language: (
        cut_in.append(language) or real(text, nlp, language=language)))
    result = _check(chunks, "The library opened in 1913. Its reading room seats 120 people.")
    assert cut_in == ["en"] and result.language == "en"  # the English splitter cut it
    wrong, right = result.sentences
    assert wrong.verdict == "hallucinated" and wrong.detector == "unstated_entities"
    assert '"1913"' in wrong.reasons[0]
    assert right.verdict == "supported"
    assert not [n for n in result.notes if n.kind == "skipped"]  # nothing was skipped


def test_the_claims_language_is_the_response_s_and_the_source_s_only_if_it_does_not_tell(
) -> None:
    source = "\n\n".join([ENGLISH[0], CHINESE])
    assert claims_language("auto", "The library opened in 1913 and it has four floors.",
                           source) == "en"
    assert claims_language("auto", "1913.", source) == "zh"  # the response tells nothing
    assert claims_language("de", "The library opened in 1913.", source) == "de"  # as set


@pytest.mark.parametrize(("response", "told"), [
    ("Peter O'Meara played Norman Dike's brother.", "en"),  # was Slovak on "O" and "s"
    ("Chris Carter is American, van Gogh is Dutch.", "en"),  # was Dutch on "is", "van"
    ("Air was co-written by Scott Joplin.", "en"),  # was Polish
    ("Die Bibliothek wurde 1913 eröffnet und hat vier Etagen.", "de")])
def test_a_short_english_answer_is_not_moved_by_a_letter_or_a_shared_word(
        response: str, told: str) -> None:
    assert claims_language("auto", response, ENGLISH[0]) == told


def test_a_long_chunk_in_another_language_does_not_move_an_answer_that_tells() -> None:
    german = " ".join(["Die Stadt hat eine neue Bibliothek, und sie ist für alle offen."] * 30)
    assert claims_language("auto", "Paris is the capital.", german) == "en"


def test_a_sentence_is_read_in_its_own_language_only_when_it_clearly_has_one() -> None:
    assert sentence_language("Die Hard premiered in 1988.", "en") == "en"  # too few to tell
    assert sentence_language("Das Museum wurde im Jahr 1998 von der Stadt eröffnet und ist "
                             "seit dem Sommer geschlossen.", "en") == "de"
    assert sentence_language("博物馆于1998年开放。", "en") == "zh"


def test_a_german_sentence_in_an_english_answer_keeps_its_numbers_checked_and_says_so() -> None:
    source = "The museum opened in 1998 and was designed by Mara Lind. Admission costs 12 euros."
    response = ("The museum was designed by Jonas Berg. Das Museum wurde im Jahr 1999 von der "
                "Stadt eröffnet, und der Eintritt kostet 12 Euro.")
    result = _check(source, response)
    english, german = result.sentences
    assert english.verdict == "hallucinated" and "Jonas Berg" in english.reasons[0]
    assert german.verdict == "hallucinated" and '"1999"' in german.reasons[0]
    skipped = [(n.step, n.sentence, n.language) for n in result.notes if n.kind == "skipped"]
    assert skipped == [("entity_nli", 1, "de"), ("unstated_entities", 1, "de")]
    assert result.language == "de"  # the response's: more of its words are German


def test_numbers_are_compared_in_a_chinese_check() -> None:
    result = _check("博物馆于1998年开放。门票价格为12欧元。",
                    "博物馆于1998年开放。门票价格为15欧元。")
    first, second = result.sentences
    assert first.verdict == "supported"  # "1998" stated, though no space bounds it
    assert second.verdict == "hallucinated" and '"15"' in second.reasons[0]


@pytest.mark.parametrize(("source", "response"), [
    ("US Soccer said on Monday that the coach will stay.",
     "The united states soccer federation said the coach will stay."),
    ("The U.S. team won in Britain.", "The United States team won in the United Kingdom."),
    ("Officials of the World Health Organization met in Geneva.", "WHO officials met in Geneva."),
    ("The WHO said the outbreak was over.", "The World Health Organization said so."),
    ("Mara Lind, the architect, designed the library.", "Lind designed the library."),
    ("John Smith designed the library.", "J. Smith designed the library."),
    ("The meeting was held in Zürich.", "The meeting was held in Zurich."),
    ("Acme Corporation opened a factory.", "Acme opened a factory."),
    ("After WWII the town grew.", "The town grew after World War II."),
    ("John Ian Smith designed the library.", "John I. Smith designed the library."),
])
def test_names_are_compared_through_their_usual_short_forms(source: str, response: str) -> None:
    result = _check(source, response)
    assert [s.verdict for s in result.sentences] == ["supported"], result.sentences[0].reasons


@pytest.mark.parametrize(("source", "response", "words"), [
    ("The city has 2.4 million residents.", "The city has 4.2 million residents.", "4.2 million"),
    ("John Smith designed the library.", "Jane Smith designed the library.", "Jane Smith"),
    ("The U.S. team won.", "The Canadian team won in Canada.", "Canada"),
    # a numeral is no initial (issue 61's safety run: "World War I" passed as "World War II")
    ("The treaty ended World War II in 1945.", "The treaty ended World War I in 1945.",
     "World War I"),
    ("Before WWI the town was small.", "Before World War II the town was small.",
     "World War II"),
])
def test_a_different_value_or_name_still_fires(source: str, response: str, words: str) -> None:
    sentence, = _check(source, response).sentences
    assert sentence.verdict == "hallucinated" and words in sentence.reasons[0]


def test_a_streamed_reply_names_the_sentence_as_the_reply_numbers_it() -> None:
    """Each streamed sentence is checked alone; its note still names its place in the reply."""
    import asyncio

    source = "The museum opened in 1998. Admission costs 12 euros."
    reply = ("The museum opened in 1998. Das Museum wurde im Jahr 1998 von der Stadt eröffnet, "
             "und der Eintritt kostet 12 Euro.")
    settings = Settings(_env_file=None, detectors=["cot"], judge=False,  # type: ignore[call-arg]
                        mitigate=False)

    async def chunks() -> Any:
        for word in reply.split(" "):
            yield word + " "

    async def run() -> list[Any]:
        with Checker(settings, backend=ScriptedBackend(responder=rule_responder())) as checker:
            return [event async for event in checker.astream(source, chunks())]

    done = asyncio.run(run())[-1]
    assert {(n.step, n.sentence) for n in done.notes} == {("entity_nli", 1),
                                                          ("unstated_entities", 1)}

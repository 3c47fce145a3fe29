"""Languages beyond English (issue 45): sentences by language, stop words by language, NER on
English only, and the ``language`` setting that picks them.

Every text below is hand-written; each expected split is the one a reader makes. NLI quality
in these languages depends on the model and is not measured here (as in test_multilingual).
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from conli.agents.windows import source_windows
from conli.backends import register_backend
from conli.backends.fake import ScriptedBackend
from conli.cli import app as cli
from conli.config import Settings
from conli.ner.spacy_ner import SpacyRecognizer
from conli.pipeline import Checker
from conli.signals.lexical import SourceWords, content_words, word_scores, words
from conli.text import pysbd_split
from conli.text.language import (
    detect_language,
    guess_language,
    language_of,
    sentence_language,
    stop_words,
)
from conli.text.nlp import load_pipeline
from conli.text.segment import sentence_spans, sentence_splitter, split_response
from tests.support.responders import rule_responder

DE = ("Die Stadt hat das neue Bad für 4,2 Mio. Euro gebaut. Es kamen ca. 12.000 Besucher im "
      "ersten Monat. Der Bau wurde durch Spenden finanziert. Die Eröffnung war am 3. Oktober.")
DE_SENTENCES = ["Die Stadt hat das neue Bad für 4,2 Mio. Euro gebaut.",
                "Es kamen ca. 12.000 Besucher im ersten Monat.",
                "Der Bau wurde durch Spenden finanziert.",
                "Die Eröffnung war am 3. Oktober."]
# (language, text, its sentences): abbreviations, decimal commas, thousands and titles
CASES = [
    ("de", DE, DE_SENTENCES),
    ("fr", "Le projet a coûté 3,5 M. d'euros. Il a été financé par la ville, etc. Le maire, "
           "M. Dupont, l'a inauguré.",
     ["Le projet a coûté 3,5 M. d'euros.", "Il a été financé par la ville, etc.",
      "Le maire, M. Dupont, l'a inauguré."]),
    ("fr", "Mme Martin a payé 2,5 millions d'euros. Le Dr. Leroy est arrivé à 14 h. Il y avait "
           "env. 3 000 personnes.",
     ["Mme Martin a payé 2,5 millions d'euros.", "Le Dr. Leroy est arrivé à 14 h.",
      "Il y avait env. 3 000 personnes."]),
    ("es", "El proyecto costó 2,5 mill. de euros. Lo inauguró el Sr. García. Hubo aprox. 3.000 "
           "visitantes.",
     ["El proyecto costó 2,5 mill. de euros.", "Lo inauguró el Sr. García.",
      "Hubo aprox. 3.000 visitantes."]),
    ("es", "La Dra. López llegó a las 10. El proyecto costó 2,5 millones de euros. Hubo unos "
           "3.000 visitantes.",
     ["La Dra. López llegó a las 10.", "El proyecto costó 2,5 millones de euros.",
      "Hubo unos 3.000 visitantes."]),
]
IDS = [f"{language}-{n}" for n, (language, _, _) in enumerate(CASES)]


def _indexed(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[start:end] for start, end in spans]


# --- sentences ----------------------------------------------------------------------------


@pytest.mark.parametrize(("language", "text", "expected"), CASES, ids=IDS)
def test_each_cut_keeps_abbreviations_and_numbers_whole(
    language: Any, text: str, expected: list[str]
) -> None:
    """The response's cut, the source's (word overlap) and the windows' all give the sentences."""
    found = split_response(text, load_pipeline(), language=language)
    assert [s.text for s in found] == expected
    assert all(text[s.start : s.end] == s.text for s in found)
    for paragraphs in (False, True):
        spans = sentence_spans(text, paragraphs=paragraphs, language=language)
        assert _indexed(text, spans) == expected


@pytest.mark.parametrize(("language", "text", "expected"), CASES, ids=IDS)
def test_a_check_reads_the_language_from_the_source_and_cuts_in_it(
    language: Any, text: str, expected: list[str]
) -> None:
    """``auto`` (the default): no setting names the language, the source tells it."""
    settings = Settings(mitigate=False, judge=False, word_scores="off")
    result = Checker(settings, backend=ScriptedBackend(responder=rule_responder())).check(
        text, text)
    assert result.language == language
    assert [s.text for s in result.sentences] == expected
    assert all(text[s.start : s.end] == s.text for s in result.sentences)


def test_the_source_is_indexed_and_windowed_by_its_sentences() -> None:
    indexed = SourceWords.of(DE, "de")
    assert list(indexed.texts) == DE_SENTENCES
    long = " ".join([DE] * 30)
    windows = source_windows(long, 400)
    assert len(windows) > 1
    assert all(_whole_sentences(window) for window in windows)


def _whole_sentences(window: str) -> bool:
    """The window is whole sentences of ``DE`` joined by one space (as windows join them)."""
    while window:
        first = next((s for s in DE_SENTENCES if window.startswith(s)), None)
        if first is None:
            return False
        window = window[len(first):].removeprefix(" ")
    return True


def test_a_streamed_german_reply_is_cut_as_check_cuts_it(settings: Settings) -> None:
    """The stream re-cuts the growing reply with the source's language: "Mio." ends nothing."""
    from tests.support.streams import _checker, _chunks, _collect, _pieces

    checker, _ = _checker(settings)
    expected = checker.check(DE, DE).sentences
    assert [s.text for s in expected] == DE_SENTENCES
    rng = random.Random(45)
    for longest in (1, 5, 40):
        events = asyncio.run(_collect(checker.astream(DE, _chunks(_pieces(DE, rng, longest)))))
        assert [e.sentence.text for e in events[:-1]] == DE_SENTENCES, longest
        assert events[-1].language == "de"


def test_chinese_and_japanese_keep_conli_s_own_splitter() -> None:
    zh = "博物馆于1998年开放。门票价格为15欧元！你去过吗？"
    ja = "博物館は1998年に開館しました。入場料は12ユーロです。"
    assert (detect_language(zh), detect_language(ja)) == ("zh", "ja")
    assert _indexed(zh, sentence_spans(zh, language="zh")) == [
        "博物馆于1998年开放。", "门票价格为15欧元！", "你去过吗？"]
    assert _indexed(ja, sentence_spans(ja, language="ja")) == [
        "博物館は1998年に開館しました。", "入場料は12ユーロです。"]


def test_a_sentence_pysbd_would_alter_is_cut_by_the_rules() -> None:
    """pySBD may drop characters: then it gives no spans, and the rules cut the line."""
    assert pysbd_split._located("Eins. Zwei.", ["Eins.", "Drei."]) is None
    assert pysbd_split._located("Eins.  Zwei ist  hier.", ["Eins. ", "Zwei ist hier."]) == [
        (0, 5), (7, 22)]
    text = "Erster Satz.\r\nZweiter  Satz hier."
    assert _indexed(text, sentence_spans(text, language="de")) == [
        "Erster Satz.", "Zweiter  Satz hier."]


def test_the_splitter_of_generation_and_eval_takes_a_language() -> None:
    split = sentence_splitter(language="auto")
    assert split(DE) == DE_SENTENCES
    assert split("The bridge opened in 1998. It is 40 m long.") == [
        "The bridge opened in 1998.", "It is 40 m long."]


# --- which language ----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "language"), [
    (DE, "de"), (CASES[1][1], "fr"), (CASES[3][1], "es"),
    ("Il progetto è costato 2,5 milioni di euro. Lo ha inaugurato il sindaco.", "it"),
    ("Het project kostte 2,5 miljoen euro. De burgemeester heeft het geopend.", "nl"),
    ("Проект стоил 2,5 млн евро. Его открыл мэр города в прошлом году.", "ru"),
    ("The bridge is 40 metres long. It was opened in 1998 by the mayor.", "en"),
    ("Dr. Smith paid 2.4 million for the U.S. site. It rose!! Then it fell.", "en"),
])
def test_the_language_is_told_by_stop_words(text: str, language: str) -> None:
    assert guess_language(text) == language


def test_a_text_that_does_not_tell_is_read_as_english() -> None:
    assert guess_language("Arthur's Magazine") is None  # no stop word at all
    assert detect_language("Arthur's Magazine") == "en"
    assert detect_language("O projeto custou 2,5 milhões.") == "en"  # a tie: not told
    assert language_of("de", "The bridge is 40 metres long.") == "de"  # the setting decides


def test_the_language_is_a_setting_and_a_flag(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path, capsys: Any) -> None:
    monkeypatch.setenv("CONLI_LANGUAGE", "fr")
    assert Settings().language == "fr"
    monkeypatch.delenv("CONLI_LANGUAGE")
    assert Settings().language == "auto"
    register_backend("fake-languages",
                     lambda arg, settings: ScriptedBackend(responder=rule_responder()))
    source, response = tmp_path / "source.txt", tmp_path / "response.txt"
    source.write_text("The bridge opened in 1998.")
    response.write_text(DE)
    args = ["check", "--source", str(source), "--response", str(response),
            "--llm", "fake-languages", "--no-mitigate", "--no-judge", "--json"]
    assert cli.main([*args, "--language", "de"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["language"] == "de"
    assert [s["text"] for s in result["sentences"]] == DE_SENTENCES
    with pytest.raises(SystemExit):
        cli.main([*args, "--language", "xx"])


# --- stop words ---------------------------------------------------------------------------


def test_german_stop_words_are_not_content_words() -> None:
    assert {"der", "die", "das", "und", "wurde", "es", "im"} <= stop_words("de")
    text = "Der Bau wurde durch Spenden finanziert und die Stadt hat es im Sommer eröffnet."
    found = content_words(text, "de")
    assert not {"der", "die", "wurd", "und", "es", "im", "hat"} & set(found)
    assert [w[0] for w in words(text, "de")] == ["Bau", "Spenden", "finanziert", "Stadt",
                                                  "Sommer", "eröffnet"]


def test_a_german_check_scores_no_stop_word() -> None:
    """Word scores (and every word signal) use the stop words of the texts' language."""
    source = "Der Bau wurde durch Spenden finanziert."
    response = "Der Bau wurde durch die Stadt finanziert."
    scored = {w.text: w.score for w in word_scores(response, source, "de")}
    assert scored == {"Bau": 0.0, "Stadt": 1.0, "finanziert": 0.0}
    settings = Settings(mitigate=False, judge=False)
    result = Checker(settings, backend=ScriptedBackend(responder=rule_responder())).check(
        source, response)
    assert {w.text for w in result.word_scores} == {"Bau", "Stadt", "finanziert"}


def test_numbers_are_never_stop_words() -> None:
    """spaCy's Chinese list holds the digits; conli's lists hold no number."""
    assert not any(ch.isdigit() for word in stop_words("zh") for ch in word)
    assert "5" in content_words("门票5欧元", "zh")


# --- entities -----------------------------------------------------------------------------


def test_the_english_ner_does_not_read_german_and_the_result_says_so(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """English spaCy tags "Spenden" (donations) as a person; on German it must not run."""
    read: list[str] = []
    entities = SpacyRecognizer.entities
    monkeypatch.setattr(SpacyRecognizer, "entities",
                        lambda self, text: read.append(text) or entities(self, text))
    settings = Settings(mitigate=False, judge=False, detectors=["cot"])
    result = Checker(settings, backend=ScriptedBackend(responder=rule_responder())).check(
        DE, DE)
    assert read == []
    # numbers and dates are still compared (issue 61): values, no name, all in the source
    values = [(e.text, e.label) for s in result.sentences for e in s.entities]
    assert values == [("4,2 Mio", "VALUE"), ("12.000", "VALUE"), ("3", "VALUE")]
    assert all(e.in_source for s in result.sentences for e in s.entities)
    assert all(j.detector == "sentence_nli" for s in result.sentences for j in s.judgements)
    # a note per sentence and rule: which sentence's names were not compared, and why
    assert [(n.kind, n.step, n.reason, n.language, n.sentence) for n in result.notes] == [
        ("skipped", "entity_nli", "language", "de", i) for i in range(4)] + [
        ("skipped", "unstated_entities", "language", "de", i) for i in range(4)]
    assert "sentence 0 is in de" in result.notes[0].message
    assert "numbers and dates were compared" in result.notes[0].message
    english = Checker(settings, backend=ScriptedBackend(responder=rule_responder())).check(
        "The bridge opened in 1998.", "The bridge opened in 1998.")
    assert read and english.notes == [] and english.language == "en"


def test_in_the_entity_only_ablation_a_german_claim_is_unverified() -> None:
    """With no sentence verdict to stand on, a skipped entity level passes nothing."""
    settings = Settings(mitigate=False, judge=False, detectors=["cot"], sentence_level=False)
    result = Checker(settings, backend=ScriptedBackend(responder=rule_responder())).check(
        DE, DE)
    checked = [s for s in result.sentences if s.checked]
    assert checked and all(s.verdict == "unverified" for s in checked)
    assert result.verdict == "unverified" and result.notes[0].step == "entity_nli"


@pytest.mark.parametrize("sentence", [
    "Chris Carter is American, van Gogh is Dutch.",  # "is", "van": Dutch stop words too
    "Edward McCaffery: There's a fundamental unfairness to U.",  # "s", "u": Slovak ones
    "Lady Antebellum singer Hillary Scott 's tour bus caught fire on a Texas freeway .",
])
def test_an_english_sentence_keeps_english_on_a_letter_or_a_shared_word(sentence: str) -> None:
    # issue 61's safety run: 24 English dev sentences were read as Slovak, Dutch, Polish or
    # German, so their names went uncompared; a sentence now needs 2 more stop words of more
    # than one letter than the check's language has
    assert sentence_language(sentence, "en") == "en"
    assert sentence_language("Die Brücke wurde 2016 eröffnet und ist 840 Meter lang.", "en") == "de"

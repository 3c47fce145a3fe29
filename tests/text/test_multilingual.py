"""Text that is not English: sentences, offsets, words and a planted number error (issue 30).

Hand-written checks in German and Chinese. NLI quality in those languages depends on the
model and is not measured here; what is checked is what conli itself does with the text.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from conli.agents.windows import source_windows
from conli.config import Settings
from conli.graph.coverage import words
from conli.pipeline import Checker
from conli.signals.lexical import SourceWords, content_words, overlap
from conli.text.nlp import load_pipeline
from conli.text.segment import select_claims, sentence_spans, split_response, utf16_offset
from tests.support.signals import Reader, model_json

DE_SOURCE = ("Das Stadtmuseum wurde am 3. Oktober 1998 eröffnet. Es hat drei Etagen und "
             "zeigt z. B. Gemälde aus Köln. Der Eintritt kostet 12 Euro.")
DE_RESPONSE = "Das Stadtmuseum wurde am 3. Oktober 1998 eröffnet. Der Eintritt kostet 15 Euro."
ZH_SOURCE = "博物馆于1998年开放。它有三层楼！门票价格为12欧元。"
ZH_RESPONSE = "博物馆于1998年开放。门票价格为15欧元！你去过吗？"


def cut(text: str) -> list[str]:
    """The response's sentences as ``check`` cuts them, each checked to index ``text``."""
    found = split_response(text, load_pipeline())
    for s in found:
        assert text[s.start : s.end] == s.text
    return [s.text for s in found]


def test_german_sentences_keep_a_date_and_an_abbreviation_whole() -> None:
    assert cut(DE_SOURCE) == [
        "Das Stadtmuseum wurde am 3. Oktober 1998 eröffnet.",
        "Es hat drei Etagen und zeigt z. B. Gemälde aus Köln.",
        "Der Eintritt kostet 12 Euro.",
    ]
    by_rules = [DE_SOURCE[a:b] for a, b in sentence_spans(DE_SOURCE)]
    assert by_rules[0] == "Das Stadtmuseum wurde am 3. Oktober 1998 eröffnet."


def test_chinese_sentences_end_at_full_width_stops_without_a_space() -> None:
    assert cut(ZH_RESPONSE) == ["博物馆于1998年开放。", "门票价格为15欧元！", "你去过吗？"]
    assert cut("他说：“好。”然后走了。") == ["他说：“好。”", "然后走了。"]  # the quote stays
    for paragraphs in (False, True):
        spans = sentence_spans(ZH_SOURCE, paragraphs=paragraphs)
        assert [ZH_SOURCE[a:b] for a, b in spans] == ["博物馆于1998年开放。", "它有三层楼！",
                                                      "门票价格为12欧元。"]


def test_a_chinese_question_is_kept_but_not_checked() -> None:
    found = split_response(ZH_RESPONSE, load_pipeline())
    assert [s.checked for s in select_claims(found)] == [True, True, False]


def test_offsets_index_the_text_in_code_points_and_utf16() -> None:
    text = "😀 Der Turm ist 40 Meter hoch.\n\n𠀀文字。它很高！"
    found = split_response(text, load_pipeline())
    assert [s.text for s in found] == ["😀 Der Turm ist 40 Meter hoch.", "𠀀文字。", "它很高！"]
    for s in found:
        assert text[s.start : s.end] == s.text
        units = text.encode("utf-16-le")
        start16, end16 = utf16_offset(text, s.start), utf16_offset(text, s.end)
        assert units[2 * start16 : 2 * end16].decode("utf-16-le") == s.text
    assert (found[1].start, utf16_offset(text, found[1].start)) == (31, 32)  # one emoji before
    assert utf16_offset(text, found[2].start) == found[2].start + 2  # and one astral ideograph


def test_words_of_any_script_are_whole() -> None:
    assert content_words("Es wurde eröffnet") == ["es", "wurd", "eröffnet"]
    assert [w[0] for w in words("Die Straße wurde eröffnet.")] == ["Die", "Straße", "wurde",
                                                                    "eröffnet"]
    found = words("门票12欧元")
    assert [w[0] for w in found] == ["门", "票", "12", "欧", "元"]
    assert all("门票12欧元"[start:end] == text for text, start, end, _ in found)


def test_a_chinese_source_is_windowed_at_its_sentences() -> None:
    source = "这座桥于1998年建成。" * 40
    windows = source_windows(source, 120)
    assert len(windows) > 1 and all(len(w) <= 120 for w in windows)
    assert all(piece == "这座桥于1998年建成。" for w in windows for piece in w.split(" "))


@pytest.mark.parametrize(("source", "response"), [(DE_SOURCE, DE_RESPONSE),
                                                  (ZH_SOURCE, ZH_RESPONSE)])
def test_the_number_signal_finds_a_planted_number(source: str, response: str) -> None:
    first, second = cut(response)[:2]
    indexed = SourceWords.of(source)
    assert overlap(first, indexed).novel_numbers == []
    assert overlap(second, indexed).novel_numbers == ["15"]


@pytest.mark.parametrize(("source", "response"), [(DE_SOURCE, DE_RESPONSE),
                                                  (ZH_SOURCE, ZH_RESPONSE)])
def test_check_flags_the_sentence_with_a_planted_number(
    source: str, response: str, tmp_path: Path
) -> None:
    """Through ``Checker.check``: the signal detector with a classifier weighing new numbers."""
    artifact = tmp_path / "signals.json"
    artifact.write_text(json.dumps(model_json()))
    settings = Settings(detectors=["fast"], signal_model=artifact, mitigate=False, judge=False)
    result = Checker(settings, backend=Reader()).check(source, response)
    checked = [s for s in result.sentences if s.checked]
    assert [s.verdict for s in checked] == ["supported", "hallucinated"]
    assert "15" in checked[1].text and result.verdict == "hallucinated"
    for s in result.sentences:
        assert response[s.start : s.end] == s.text


STREAMED = ["😀 " + DE_RESPONSE, "𠀀" + ZH_RESPONSE + "\n\n- 它有三层楼。"]


@pytest.mark.parametrize("reply", STREAMED)
def test_check_and_stream_give_utf16_offsets_after_an_astral_character(
    settings: Settings, reply: str
) -> None:
    """Each sentence's UTF-16 offsets index the reply as a JavaScript string does."""
    from tests.support.streams import _checker, _chunks, _collect, _pieces

    checker, _ = _checker(settings)
    expected = checker.check(DE_SOURCE + ZH_SOURCE, reply).sentences
    units = reply.encode("utf-16-le")
    assert len(expected) >= 2 and expected[1].start_utf16 == expected[1].start + 1
    for s in expected:
        assert reply[s.start : s.end] == s.text
        assert s.start_utf16 is not None and s.end_utf16 is not None
        assert units[2 * s.start_utf16 : 2 * s.end_utf16].decode("utf-16-le") == s.text
    rng = random.Random(3)
    for longest in (1, 4, 30):
        events = asyncio.run(_collect(checker.astream(
            DE_SOURCE + ZH_SOURCE, _chunks(_pieces(reply, rng, longest)))))
        assert [e.sentence for e in events[:-1]] == expected, longest


def test_ascii_text_tokenises_as_the_english_only_patterns_did() -> None:
    """The tokenizer replaced ASCII-only patterns; on ASCII text it must match them exactly."""
    import re

    from conli.text.words import terms, word_count, written_words

    old_term = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
    old_written = re.compile(r"[A-Za-z0-9]+(?:[.,'’][A-Za-z0-9]+)*")
    samples = ["It cost $2,400.50 (U.S.) on 3.4.2020, didn't it? snake_case x_1 e.g.foo",
               "A.B.C. 1,000,000 ... 7.x 'quoted' -- 12th _under_ a,b.c 2.4km", ""]
    for text in samples:
        assert terms(text.lower()) == old_term.findall(text.lower())
        assert [m.span() for m in written_words(text)] == [
            m.span() for m in old_written.finditer(text)]
        assert word_count(text) == len(re.findall(r"\w+", text))


def test_a_german_date_still_being_streamed_is_not_cut_at_its_day(settings: Settings) -> None:
    """"am 3. Okt" may become "am 3. Oktober": the stream must not hand on "am 3." alone."""
    from tests.support.streams import _checker, _chunks, _collect

    assert cut("Das Stadtmuseum wurde am 3. Okt") == ["Das Stadtmuseum wurde am 3. Okt"]
    checker, _ = _checker(settings)
    parts = ["Das Stadtmuseum wurde am 3. Okt", "ober 1998 eröffnet. Der Eintritt kostet 15 Euro."]
    events = asyncio.run(_collect(checker.astream(DE_SOURCE, _chunks(parts, pause=0.3))))
    assert [e.sentence.text for e in events[:-1]] == cut(DE_RESPONSE)

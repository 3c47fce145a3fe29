"""Loaders against real records in ../shared/data (skipped without it) and small fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conli.evaluation.loaders import (
    DATASETS,
    DataFormatError,
    load_claims_json,
    load_conli_suite,
    load_dataset,
    load_jsonl,
)
from tests.support.paths import ROOT, TESTS

DATA = ROOT.parent / "shared" / "data"
FIXTURE = TESTS / "fixtures" / "eval_sample.jsonl"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")


@needs_data
def test_conli_suite_first_record_and_counts() -> None:
    examples = load_dataset("conli_qags_cnndm", DATA)
    assert len(examples) == 235
    assert sum(e.label for e in examples) == 122  # README: 122/113 hallucinated/not
    first = examples[0]
    assert first.id == "conli_qags_cnndm:1" and first.label is True
    assert first.response.startswith("He is a venezuelan dystrophy.")
    assert first.source.startswith("( cnn ) about 20 hours after the boston marathon")
    assert first.meta["consistency"] == [0.0]
    assert examples[1].label is False and examples[1].meta["consistency"] == [1.0]
    assert first.sentence_labels is None  # one TSV row per response: response-level labels


@needs_data
def test_halueval_qa_gives_two_examples_per_record_with_knowledge_as_source() -> None:
    examples = load_dataset("halueval_qa", DATA)
    assert len(examples) == 2000
    grounded, hallucinated = examples[0], examples[1]
    assert grounded.response == "Arthur's Magazine" and grounded.label is False
    assert hallucinated.response == "First for Women was started first." and hallucinated.label
    assert grounded.source.startswith("Arthur's Magazine (1844–1846) was an American literary")
    assert "Which magazine" not in grounded.source
    assert grounded.question and grounded.question.startswith("Which magazine was started first")
    assert hallucinated.reference == "Arthur's Magazine"


@needs_data
def test_halueval_summarization_pairs() -> None:
    examples = load_dataset("halueval_summarization", DATA)
    assert len(examples) == 1000 and sum(e.label for e in examples) == 500
    assert examples[0].source.startswith("Marseille, France (CNN)The French prosecutor")
    assert examples[0].response.startswith('Marseille prosecutor says "so far no videos')


@needs_data
@pytest.mark.parametrize(("name", "n", "hallucinated"), [
    ("aggrefact_cnndm", 459, 59), ("aggrefact_xsum", 777, 383), ("factcc", 931, 132)])
def test_claim_sets_invert_the_consistency_label(name: str, n: int, hallucinated: int) -> None:
    examples = load_dataset(name, DATA)
    assert len(examples) == n and sum(e.label for e in examples) == hallucinated


@needs_data
def test_aggrefact_first_record() -> None:
    first = load_dataset("aggrefact_xsum", DATA)[0]
    assert first.response == ("Two security guards have been threatened during a robbery at a "
                              "bank in edinburgh.")
    assert first.source.startswith("Police said three armed men took a five-figure sum")
    assert first.label is False and first.meta["cut"] == "val"


@needs_data
def test_every_named_dataset_loads() -> None:
    for name in DATASETS:
        assert load_dataset(name, DATA), name


def test_conli_suite_groups_rows_into_responses(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "7.txt").write_text("A source.", encoding="utf-8")
    (tmp_path / "t_raw_response.tsv").write_text(
        "DataID\tSentenceID\tSentence\tIsHallucination\tConsistency\r\n"
        '7\t2\tSecond "quoted" one.\t1\t0.5\r\n7\t1\tFirst one.\t0\t1.0\r\n', encoding="utf-8")
    [example] = load_conli_suite(tmp_path, "suite")
    assert example.response == 'First one. Second "quoted" one.'
    assert example.sentence_labels == (("First one.", False), ('Second "quoted" one.', True))
    assert example.label is True and example.source == "A source."


def test_conli_suite_missing_source_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "t_raw_response.tsv").write_text(
        "DataID\tSentenceID\tSentence\tIsHallucination\tConsistency\n9\t1\tX.\t0\t1\n")
    with pytest.raises(DataFormatError, match=r"9\.txt"):
        load_conli_suite(tmp_path)


def test_plain_jsonl_fixture() -> None:
    examples = load_jsonl(FIXTURE)
    assert [e.id for e in examples] == ["s1", "s2", "s3", "s4"]
    assert [e.label for e in examples] == [False, True, False, True]
    assert examples[1].sentence_labels == (("The library opened in 1921.", False),
                                           ("It holds 90,000 books.", True))
    assert examples[0].dataset == "eval_sample" and examples[3].reference is None


@pytest.mark.parametrize(("record", "message"), [
    ({"source": "s", "response": "r"}, "label"),
    ({"source": "s", "response": "r", "label": 2}, "0 or 1"),
    ({"source": "s", "label": 1}, "response"),
    ({"source": "s", "response": "r", "label": 0,
      "sentences": [{"text": "r", "hallucinated": True}]}, "disagrees"),
])
def test_plain_jsonl_errors_name_the_line(tmp_path: Path, record: dict[str, object],
                                          message: str) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text("\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=message) as caught:
        load_jsonl(path)
    assert "mine.jsonl:2" in str(caught.value)


def test_claims_json_string_labels(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"document": "d", "claim": "c", "label": "0"},
                                {"document": "d", "claim": "e", "label": 1}]))
    assert [e.label for e in load_claims_json(path, "c")] == [True, False]

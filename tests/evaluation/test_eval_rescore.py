"""Stored runs re-scored with the library metrics: no published number may move.

Detection: each stored run's ``predictions.jsonl`` is read back with the project's own
loader and scored again; every number in its ``results.json`` "scores" must come back
(counts exactly, rates to 1e-9; scikit-learn's trapezoidal AUROC and the former rank-sum
formula differ by at most one rounding step, about 1e-16).

Rewrite: no stored run has rewrite results, so ROUGE and BLEU are checked against the
values the former hand-written implementation gave on fixed pairs (computed before it was
replaced and written down here). ROUGE is identical. BLEU moves where the tokenizers
differ: the old one split every non-word character off (``3.5bn`` -> ``3 . 5bn``,
``-led`` -> ``- led``, ``didn't`` -> ``didn ' t``), sacrebleu's ``13a`` keeps a period or
comma between digits, a hyphen not after a digit and an apostrophe attached. No stored or
published number is a BLEU, so none moves.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

from conli.evaluation.detection import (
    Outcome,
    predictions_file,
    read_predictions,
    score_outcomes,
)
from conli.evaluation.metrics import detection_report
from conli.evaluation.rewrite import corpus_bleu, overlap_scores, rouge_l, rouge_n
from tests.support.paths import ROOT

RESULTS = ROOT / "benchmarks" / "results"

# Every stored detection run; the first two are the tables of docs/benchmarks.md.
RUNS = {
    "detect-default-v3": 181,
    "detect-default": 800,
    "detect-halueval_qa-30": 30,
    "detect-hierarchical": 169,
    "detect-hierarchical-score-first": 45,
    "detect-hierarchical-v2": 113,
}


def load_outcomes(run: str, tmp_path: Path, *, with_result: bool = False) -> list[Outcome]:
    """The run's predictions, read from a copy: ``read_log`` may repair a file in place.

    Scoring reads only the outcome's own fields, never the stored ``CheckResult``, so the
    metric tests leave it out; ``with_result`` loads the whole record.
    """
    stored = predictions_file(RESULTS / run)  # a large log is stored gzipped
    copy = tmp_path / stored.name
    shutil.copyfile(stored, copy)
    if with_result:
        return read_predictions(copy, Outcome.from_json)
    return read_predictions(copy, lambda record: Outcome.from_json(
        {key: value for key, value in record.items() if key != "result"}))


def assert_same(stored: Any, rescored: Any, path: str, compared: list[str]) -> None:
    """Walk both trees: same keys, counts and labels exact, floats to 1e-9."""
    if isinstance(stored, dict):
        assert isinstance(rescored, dict), path
        assert set(stored) == set(rescored), f"{path}: {sorted(stored)} != {sorted(rescored)}"
        for key in stored:
            assert_same(stored[key], rescored[key], f"{path}/{key}", compared)
    elif isinstance(stored, float) or isinstance(rescored, float):
        assert stored is not None and rescored is not None, f"{path}: {stored} != {rescored}"
        assert rescored == pytest.approx(stored, rel=0, abs=1e-9), path
        compared.append(path)
    else:  # ints, None, strings
        assert type(stored) is type(rescored) and stored == rescored, \
            f"{path}: {stored!r} != {rescored!r}"
        compared.append(path)


@pytest.mark.parametrize("run", list(RUNS))
def test_stored_detection_scores_are_reproduced(run: str, tmp_path: Path) -> None:
    outcomes = load_outcomes(run, tmp_path)
    assert len(outcomes) == RUNS[run]
    stored = json.loads((RESULTS / run / "results.json").read_text(encoding="utf-8"))
    assert stored["kind"] == "detect"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the edge cases are decided here, not warned about
        rescored = score_outcomes(outcomes)
    compared: list[str] = []
    assert_same(stored["scores"], rescored, run, compared)
    assert sum(p.endswith("/auroc/flagged_share/value") for p in compared) >= 1
    assert len(compared) >= 30  # not a vacuous walk


@pytest.mark.parametrize("run", ["detect-default-v3", "detect-default"])
def test_stored_predictions_load_whole(run: str, tmp_path: Path) -> None:
    # the stored CheckResults still validate, so an interrupted run can resume on them
    outcomes = load_outcomes(run, tmp_path, with_result=True)
    assert len(outcomes) == RUNS[run]
    assert all(o.result is not None for o in outcomes if o.error is None)


def test_pooled_800_row_of_the_benchmarks_table(tmp_path: Path) -> None:
    # docs/benchmarks.md, "all 800 pooled": F1-macro 64.9, BAcc 66.1 (not in results.json)
    outcomes = load_outcomes("detect-default", tmp_path)
    pooled = detection_report([o.gold for o in outcomes], [o.predicted for o in outcomes])
    assert round(100 * pooled["f1_macro"], 1) == 64.9
    assert round(100 * pooled["balanced_accuracy"], 1) == 66.1


# (candidate, reference, former ROUGE-1, ROUGE-2, ROUGE-L F-measures, former BLEU of the pair)
PAIRS = [
    ("The cat sat on the mat.", "the cat is on the mat",
     0.8333333333333334, 0.6, 0.8333333333333334, 0.0),
    ("The U.S.-led deal, worth $3.5bn, was signed on 12 March 2021.",
     "The deal, led by the U.S., was worth $3.5 billion and signed in March 2021.",
     0.7096774193548386, 0.27586206896551724, 0.5161290322580646, 29.05563804238317),
    ("He didn't say the e-mail was sent.", "He did not say that the email had been sent.",
     0.4210526315789474, 0.0, 0.4210526315789474, 0.0),
    ("Café owners in São Paulo raised prices by 10%.",
     "Cafe owners in Sao Paulo raised prices by ten percent.",
     0.6, 0.4444444444444444, 0.6, 28.997844147152072),
    ("Police arrested two men on Tuesday after a robbery at a bank in Leeds. Both are in "
     "custody.",
     "Two men were arrested by police on Tuesday after a bank robbery in Leeds; both are in "
     "custody.",
     0.8888888888888888, 0.5882352941176471, 0.7222222222222222, 29.62789157394226),
    ("The runners were running quickly.", "The runner runs quick.",  # no stemming
     0.22222222222222224, 0.0, 0.22222222222222224, 0.0),
    ("", "A reference with words.", 0.0, 0.0, 0.0, 0.0),
    ("Exactly the same text, with punctuation: yes!",
     "Exactly the same text, with punctuation: yes!", 1.0, 1.0, 1.0, 100.0),
]
# The tokenizers disagree on two pairs: "-led", "3.5bn", "3.5" (pair 1) and "didn't",
# "e-mail" (pair 2) are one 13a token each, several of the former tokenizer's.
TOKENISATION_PAIRS = (1, 2)
FORMER_CORPUS_BLEU = 32.78318470961572  # all eight pairs as one corpus
FORMER_CORPUS_BLEU_AGREEING = 38.734767429381456  # the six pairs the tokenizers agree on
FORMER_OVERLAP = {"rouge1": 0.5843968119222788, "rouge2": 0.3635677259409511,
                  "rougeL": 0.5393699302018488}


@pytest.mark.parametrize("pair", PAIRS, ids=range(len(PAIRS)))
def test_rouge_is_unchanged(pair: tuple[str, str, float, float, float, float]) -> None:
    candidate, reference, r1, r2, rl, _ = pair
    assert rouge_n(candidate, reference, 1) == pytest.approx(r1, rel=0, abs=1e-12)
    assert rouge_n(candidate, reference, 2) == pytest.approx(r2, rel=0, abs=1e-12)
    assert rouge_l(candidate, reference) == pytest.approx(rl, rel=0, abs=1e-12)


def test_bleu_is_unchanged_where_the_tokenizers_agree() -> None:
    agreeing = [p for number, p in enumerate(PAIRS) if number not in TOKENISATION_PAIRS]
    for candidate, reference, *_, former in agreeing:
        assert corpus_bleu([candidate], [reference]) == pytest.approx(former, abs=1e-9)
    assert corpus_bleu([p[0] for p in agreeing], [p[1] for p in agreeing]) == \
        pytest.approx(FORMER_CORPUS_BLEU_AGREEING, abs=1e-9)


def test_bleu_moves_where_the_tokenizers_differ() -> None:
    candidate, reference, *_, former = PAIRS[1]
    # 13a: "$ 3.5bn" against "$ 3.5 billion", "-led" against "led"; the former tokens
    # "$ 3 . 5bn" against "$ 3 . 5 billion" shared "3", "." and the n-grams around them.
    assert former == pytest.approx(29.05563804238317)
    assert corpus_bleu([candidate], [reference]) == pytest.approx(21.298747244401188, abs=1e-9)
    candidate, reference, *_, former = PAIRS[2]
    assert corpus_bleu([candidate], [reference]) == former == 0.0  # no 4-gram match either way
    every = overlap_scores([p[0] for p in PAIRS], [p[1] for p in PAIRS])
    # the corpus sums both pairs' n-gram counts: 32.78 before, 31.31 now
    assert every["bleu"] == pytest.approx(31.309913349646376, abs=1e-9)
    assert FORMER_CORPUS_BLEU - every["bleu"] == pytest.approx(1.4733, abs=1e-4)
    for name, value in FORMER_OVERLAP.items():  # the ROUGE means do not move
        assert every[name] == pytest.approx(value, rel=0, abs=1e-12)

"""ROUGE and BLEU against hand-computed values."""

from __future__ import annotations

import math

import pytest

from conli.evaluation.rewrite import (
    corpus_bleu,
    lcs_length,
    overlap_scores,
    rouge_l,
    rouge_n,
    rouge_tokens,
)

CAND, REF = "The cat sat on the mat.", "the cat is on the mat"


def test_rouge_tokens_follow_rouge_score_defaults() -> None:
    assert rouge_tokens("The U.S.-led deal, worth $3.5bn!") == ["the", "u", "s", "led", "deal",
                                                                 "worth", "3", "5bn"]


def test_rouge_by_hand() -> None:
    assert rouge_n(CAND, REF, 1) == pytest.approx(5 / 6)  # the x2, cat, on, mat
    assert rouge_n(CAND, REF, 2) == pytest.approx(3 / 5)  # the cat, on the, the mat
    assert lcs_length(rouge_tokens(CAND), rouge_tokens(REF)) == 5
    assert rouge_l(CAND, REF) == pytest.approx(5 / 6)
    assert rouge_n("", REF, 1) == 0.0


def test_bleu_by_hand() -> None:
    assert corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(100)
    # longer candidate: p1..p4 = 6/7, 5/6, 4/5, 3/4; no brevity penalty
    assert corpus_bleu(["the cat sat on the mat today"], ["the cat sat on the mat"]) == \
        pytest.approx(100 * (3 / 7) ** 0.25)
    # shorter candidate: all precisions 1, brevity penalty exp(1 - 6/5)
    assert corpus_bleu(["the cat sat on the"], ["the cat sat on the mat"]) == \
        pytest.approx(100 * math.exp(-0.2))
    assert corpus_bleu(["the cat sat on the mat"], ["the cat is on the mat"]) == 0.0  # no 4-gram


def test_corpus_bleu_sums_counts_over_sentences() -> None:
    # two halves: matches 4+0 unigrams ... computed as one corpus, not averaged
    value = corpus_bleu(["a b c d", "x y"], ["a b c d", "x z"])
    # p1 = 5/6, p2 = 3/4, p3 = 2/2, p4 = 1/1, lengths 6 vs 6
    assert value == pytest.approx(100 * (5 / 6 * 3 / 4) ** 0.25)


def test_overlap_scores_means() -> None:
    scores = overlap_scores([CAND, REF], [REF, REF])
    assert scores["rouge1"] == pytest.approx((5 / 6 + 1) / 2)
    assert scores["n"] == 2

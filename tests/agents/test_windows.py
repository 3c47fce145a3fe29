"""A source longer than the context: windows for NLI, the judge and the editor."""

import itertools
import re

import pytest

from conli.agents.mitigate import relevant_source
from conli.agents.nli import Hypothesis, best_supported, nli_windows
from conli.agents.nli_prompts import resolve
from conli.agents.windows import source_windows, windows_for
from conli.backends.fake import ScriptedBackend
from conli.errors import BackendError, ContextOverflowError
from conli.judges import rubric as judge_agent
from conli.models import Judgement, SentenceResult
from tests.support.responders import nli
from tests.support.windows import FIRST, LAST, reading_model, source_of

FILLER = [f"Filler sentence number {i} says nothing of note." for i in range(120)]
LONG_SOURCE = " ".join([FIRST, *FILLER, LAST])


def test_a_source_that_fits_is_one_window():
    assert source_windows("One. Two.", 100) == ["One. Two."]
    assert source_windows(LONG_SOURCE, None) == [LONG_SOURCE]


def test_windows_fit_end_at_sentences_overlap_and_cover_the_source_in_order():
    windows = source_windows(LONG_SOURCE, 1000)
    assert len(windows) > 3
    assert all(len(w) <= 1000 and w.endswith(".") for w in windows)
    for before, after in itertools.pairwise(windows):
        assert before.split(". ")[-1] in after  # the tail of each window opens the next
    sentences = [s for w in windows for s in re.split(r"(?<=\.) ", w)]
    assert list(dict.fromkeys(sentences)) == [FIRST, *FILLER, LAST]


def test_one_sentence_longer_than_a_window_is_cut_at_spaces():
    windows = source_windows("word " * 500, 300)
    assert all(0 < len(w) <= 300 for w in windows)
    assert " ".join(windows).split() == ["word"] * 500


def test_no_room_for_a_source_window_is_an_input_error():
    with pytest.raises(ContextOverflowError, match="leave"):
        windows_for(ScriptedBackend(context_window=1000), LONG_SOURCE, reserved_tokens=900)
    assert windows_for(ScriptedBackend(), LONG_SOURCE, 900) == [LONG_SOURCE]  # no known limit


def test_each_claim_keeps_its_best_window_and_windows_are_visited_in_turn(settings):
    backend = reading_model()
    claims = [Hypothesis(0, FIRST), Hypothesis(1, LAST), Hypothesis(2, "The bridge is red.")]
    judged, calls = nli(backend, LONG_SOURCE, claims, kind="sentence",
                                     settings=settings)
    assert [j.verdict for j in judged] == ["supported", "supported", "hallucinated"]
    first_window, last_window = judged[0].source_window, judged[1].source_window
    assert first_window == 0 and last_window is not None and last_window > 0
    shown = [source_of(m) for m in backend.calls]
    assert len(calls) == len(shown) == 3 * (last_window + 1)
    assert all(len(set(shown[i:i + 3])) == 1 for i in range(0, len(shown), 3))  # window-major
    assert all(len(s) < len(LONG_SOURCE) for s in shown)


def _j(verdict, label=None, score=None, window=0):
    return Judgement(detector="sentence_nli", hypothesis="h", verdict=verdict, label=label,
                     score=score, source_window=window, template="t")


def test_best_supported_never_fails_open():
    neutral, contra = _j("hallucinated", "neutral", 0.2), _j("hallucinated", "contradiction", 0.1)
    unknown, yes = _j("unverified"), _j("supported", "entailment", 0.9, window=3)
    assert best_supported([neutral, yes, unknown]) is yes
    assert best_supported([neutral, unknown, contra]) is unknown
    assert best_supported([neutral, contra]) is contra
    assert best_supported([neutral]) is neutral


def test_the_judge_keeps_the_best_window_and_says_which(settings):
    result, calls = judge_agent.judge(reading_model(), LONG_SOURCE, "The bridge opened.", settings)
    assert result.status == "scored" and result.score == 5
    assert result.note.endswith(f"best of {len(calls)} source windows: window 1")


def test_the_judge_is_unverified_when_any_window_fails(settings):
    backend = reading_model()
    good = backend._responder

    def flaky(messages):
        return "not json" if LAST in source_of(messages) else good(messages)

    backend._responder = flaky
    settings.max_reasks = 0
    result, _ = judge_agent.judge(backend, LONG_SOURCE, "The bridge opened.", settings)
    assert result.status == "unverified" and result.score is None
    assert "source window" in (result.error or "")


def test_the_editor_sees_only_the_windows_that_judged_the_flags(settings):
    backend = reading_model()
    settings = resolve(settings, backend)
    windows = nli_windows(backend, LONG_SOURCE, settings)
    flagged = [
        SentenceResult(index=i, text="x", start=0, end=1, checked=True, verdict="hallucinated",
                       judgements=[_j("hallucinated", "neutral", 0.1, window=w)])
        for i, w in enumerate((2, 1, 2))
    ]
    assert len(windows) > 2
    assert relevant_source(backend, LONG_SOURCE, flagged, settings) == (
        f"{windows[1]}\n[...]\n{windows[2]}"
    )
    assert relevant_source(backend, "Short source.", flagged, settings) == "Short source."


def test_the_eval_cache_sizes_windows_as_its_backend_would(tmp_path):
    from conli.backends.cache import CachedBackend

    class Counting(ScriptedBackend):
        def count_tokens(self, text: str) -> int:
            return len(text) // 5

    assert CachedBackend(Counting(counts_tokens=True), tmp_path).count_tokens("x" * 50) == 10
    with pytest.raises(BackendError):
        CachedBackend(ScriptedBackend(), tmp_path).count_tokens("x")
    # 25k chars at 5 a token fit; the floor would cut
    fits = Counting(context_window=8000, counts_tokens=True)
    assert windows_for(CachedBackend(fits, tmp_path), "word " * 5000, 1500) == ["word " * 5000]


def test_windows_keep_a_list_and_its_line_breaks_together():
    """Only a blank line or a stop before white space ends a piece (``paragraphs``)."""
    source = "Intro line one\nline two.\n\n- a\n- b\n\nThe site (2.4 km) opened. " * 40
    windows = source_windows(source, 200)
    assert len(windows) > 1 and all(len(w) <= 200 for w in windows)
    assert all(w.startswith(("Intro line one\nline two.", "- a\n- b", "The site (2.4 km)"))
               for w in windows)
    assert sum(w.count("- a\n- b") for w in windows) >= 40

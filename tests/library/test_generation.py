"""Faithful generation (seed 002): the monitor, FOD's backtrack and beam search, baselines."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from conli.backends.base import CallUsage, Completion, CompletionRequest
from conli.backends.fake import ScriptedBackend
from conli.cli import app as cli
from conli.config import Settings
from conli.errors import ConfigError, DeadlineExceededError, TransientBackendError
from conli.generation import ABSTAINED, generate, until_repeat
from tests.support.fake_clock import FakeClock

GREEDY = "The pier opened in 1921. It cost FALSE money. It is 400 metres long."


def split(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


class Writer(ScriptedBackend):
    """Answers the generation prompt from a script and judges claims by a flag word.

    Greedy: ``GREEDY``. A sample after an assistant prefix: the next of ``samples``
    (cycled). A claim is entailed unless it holds ``FALSE``.
    """

    def __init__(self, samples: list[str], finish: str = "stop") -> None:
        super().__init__(continues_assistant=True)
        self.samples: Iterator[str] = iter(samples * 50)
        self.finish = finish
        self.prefixes: list[str] = []
        self.seeds: list[int | None] = []

    def complete(self, request: CompletionRequest) -> Completion:
        messages = request.messages
        self.calls.append(list(messages))
        self.seeds.append(request.seed)
        usage = CallUsage(prompt_tokens=10, completion_tokens=5, seconds=0.0)
        if "You answer using only the SOURCE" in messages[0]["content"]:
            if request.temperature == 0.0:
                return Completion(GREEDY, usage, "stop")
            self.prefixes.append(messages[-1]["content"] if messages[-1]["role"] ==
                                 "assistant" else "")
            return Completion(next(self.samples), usage, self.finish)
        (claim,) = re.findall(r"<claim>(.*?)</claim>", messages[-1]["content"], re.S)
        label = "contradiction" if "FALSE" in claim else "entailment"
        if 'copy into "evidence"' in messages[0]["content"]:  # chain of thought asked
            source = messages[-1]["content"].split("<source>")[-1].split("</source>")[0]
            return Completion(json.dumps({"evidence": source.strip(), "reasoning": "by flag",
                                          "label": label}), usage, "stop")
        return Completion(json.dumps({"label": label}), usage, "stop")


SETTINGS = Settings(llm="local", fod_samples=2, fod_beams=2, generate_max_sentences=4)


def test_greedy_scores_every_sentence_as_it_is_complete() -> None:
    seen: list[str] = []
    result = generate(Writer([]), "src", split, SETTINGS, method="greedy",
                      on_sentence=lambda s: seen.append(s.text))
    assert [s.score for s in result.sentences] == [1.0, 0.0, 1.0]
    assert seen == split(GREEDY) and result.text == GREEDY


def test_abstention_refuses_the_whole_answer_when_one_sentence_fails() -> None:
    result = generate(Writer([]), "src", split, SETTINGS, method="abstain")
    assert result.abstained and result.message == ABSTAINED and result.text == ""
    assert result.backtracked_at == 1


def test_backtracking_keeps_what_came_before_the_failing_sentence() -> None:
    result = generate(Writer([]), "src", split, SETTINGS, method="backtrack")
    assert result.text == "The pier opened in 1921." and result.backtracked_at == 1


def test_fod_searches_from_the_sentence_before_and_prunes_unfaithful_samples() -> None:
    writer = Writer(["Boats leave FALSE.", "Tickets cost 5 euros."])
    seen: list[str] = []
    result = generate(writer, "src", split, SETTINGS, method="fod",
                      on_sentence=lambda s: seen.append(s.origin))
    assert result.text == "The pier opened in 1921. Tickets cost 5 euros."
    assert [s.origin for s in result.sentences] == ["greedy", "beam"] == seen
    assert all(s.score >= SETTINGS.fod_prune for s in result.sentences[1:])
    assert writer.prefixes[0] == "The pier opened in 1921."  # continued after the good part
    assert result.samples == 2  # one beam, S = 2, and a sample that ends the answer stops it
    drawn = [seed for seed in writer.seeds if seed is not None]
    assert len(drawn) == 2 and len(set(drawn)) == 2  # each sample its own seed, not a replay


def test_a_sample_that_repeats_its_beam_ends_the_answer_instead_of_looping() -> None:
    writer = Writer(["The pier opened in 1921. The pier opened in 1921."])
    result = generate(writer, "src", split, SETTINGS, method="fod")
    assert result.text == "The pier opened in 1921."  # not the same sentence up to the max
    assert result.samples == SETTINGS.fod_samples  # one step: every sample repeated
    assert until_repeat(["A b.", "C d.", "a B!", "E."]) == ["A b.", "C d."]


def test_fod_abstains_when_nothing_faithful_can_be_written() -> None:
    writer = Writer(["It is FALSE."])
    greedy = "It cost FALSE money."

    def only_bad(request: CompletionRequest) -> Completion:
        return Completion(greedy, CallUsage(1, 1, 0.0), "stop")

    original = writer.complete

    def complete(request: CompletionRequest) -> Completion:
        if "You answer" in request.messages[0]["content"] and request.temperature == 0.0:
            return only_bad(request)
        return original(request)

    writer.complete = complete  # type: ignore[method-assign]
    result = generate(writer, "src", split, SETTINGS, method="fod")
    assert result.abstained and result.text == "" and result.message == ABSTAINED


def test_rerank_keeps_the_sample_with_the_best_mean_score() -> None:
    writer = Writer(["Ships FALSE.", "The pier is long."])
    result = generate(writer, "src", split, SETTINGS, method="rerank")
    assert result.text == "The pier is long." and result.sentences[0].origin == "sample"
    assert result.samples == SETTINGS.fod_samples * SETTINGS.fod_beams


def test_a_backend_that_cannot_continue_an_answer_is_refused() -> None:
    backend = ScriptedBackend()
    backend.name = "openai"
    with pytest.raises(ConfigError, match="which the openai backend cannot"):
        generate(backend, "src", split, SETTINGS)
    assert backend.calls == []


class Flaky(Writer):
    """A ``Writer`` whose first ``failures`` calls fail as transient, each taking ``took`` s."""

    def __init__(self, clock: FakeClock, failures: int, took: float = 0.0) -> None:
        super().__init__([])
        self.clock, self.failures, self.took = clock, failures, took
        self.attempts = 0

    def complete(self, request: CompletionRequest) -> Completion:
        self.attempts += 1
        self.clock.advance(self.took)
        if self.attempts <= self.failures:
            raise TransientBackendError("503 from the scripted server")
        return super().complete(request)


def test_generation_retries_transient_errors_and_records_its_usage(clock: FakeClock) -> None:
    backend = Flaky(clock, failures=2)
    result = generate(backend, "src", split, SETTINGS, method="greedy")
    assert result.text == GREEDY  # the greedy call failed twice, then answered
    made = len(backend.calls)  # calls that answered: 1 greedy + 3 monitor judgements
    assert backend.attempts == made + 2 and made == 4
    assert (result.usage.calls, result.usage.failed_attempts) == (made, 2)
    assert result.usage.prompt_tokens == 10 * made and result.usage.completion_tokens == 5 * made
    assert result.usage_by_step["generate"].calls == 1
    assert result.usage_by_step["generate"].failed_attempts == 2
    assert sum(u.calls for u in result.usage_by_step.values()) == made
    assert (result.backend, result.model) == ("fake", "scripted")
    assert len(clock.waits) == 2  # backed off twice, on the fake clock


def test_the_check_deadline_stops_generation(clock: FakeClock) -> None:
    backend = Flaky(clock, failures=0, took=100.0)  # every call takes 100 s
    settings = SETTINGS.model_copy(update={"check_deadline_seconds": 250.0})
    with pytest.raises(DeadlineExceededError):
        generate(backend, "src", split, settings, method="fod")
    assert backend.attempts == 3  # calls at 0, 100 and 200 s; none starts at 300 s


def test_conli_generate_refuses_bad_input_before_any_model(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Any) -> None:
    binary = tmp_path / "source.bin"
    binary.write_bytes(b"\x00\x01")
    assert cli.main(["generate", "--source", str(binary)]) == 2
    assert "binary" in capsys.readouterr().err


def test_the_generation_table_compares_methods_on_checked_answers() -> None:
    from conli.evaluation import generate_eval
    from conli.evaluation.loaders import Example

    example = Example("q1", "The pier opened in 1921.", "", False, "d", question="When?")
    writer = Writer(["Boats leave FALSE.", "Tickets are sold at the gate."])
    rows = generate_eval.run(writer, [example], ["greedy", "fod", "abstain"], split, SETTINGS)
    table = generate_eval.table(rows)
    # "It is 400 metres long": the writer's own flag word passes it, the unstated rule does not
    assert table["greedy"]["supported_share"] == pytest.approx(1 / 3)
    assert table["fod"]["supported_share"] == 1.0 and table["fod"]["judge"] == 5
    assert table["greedy"]["judge"] < 4  # a third flagged: below the scale's "minor" level
    assert table["abstain"]["abstained"] == 1 and table["abstain"]["supported_share"] is None
    assert 0 < table["fod"]["content_kept_vs_greedy"] < 1
    late = generate_eval.run(writer, [example], ["greedy"], split, SETTINGS, deadline=0.0)
    assert late == []  # past its budget, a run starts no new source
    from conli.evaluation.report import generate_markdown

    meta = {"command": "c", "git_commit": "x", "backend": "b", "model": "m", "templates": [],
            "machine": {"platform": "p", "cpu_count": 2}}
    text = generate_markdown({"provenance": meta, "sources": 1, "methods": table,
                              "fod": {"S": 2, "K": 2, "tau1": 0.7, "tau2": 0.85},
                              "datasets": {"d": table}})
    assert "S = 2, K = 2" in text and "## d" in text
    assert "| fod | 1 | 0 | 100.0 | 5" in text


@pytest.mark.parametrize("flag", ["--detector", "--calibration"])
def test_conli_generate_refuses_the_check_flags_it_would_ignore(
        flag: str, capsys: pytest.CaptureFixture[str], tmp_path: Any, clock: FakeClock) -> None:
    source = tmp_path / "source.txt"
    source.write_text("The pier opened in 1921.")
    # a server that is not there: were the flag let through, no model would load
    code = cli.main(["generate", "--source", str(source), flag, "cot",
                     "--llm", "llamacpp:http://127.0.0.1:9/v1#m"])
    err = capsys.readouterr().err
    assert code == 2 and f"conli generate does not take {flag}" in err
    assert clock.waits == []  # refused before any call was tried

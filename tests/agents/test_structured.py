import json

import pytest

from conli.agents.answers import JudgeErrorsAnswer
from conli.agents.structured import CallRecord, ask_structured, parse_json_model, usage_of
from conli.backends.base import CallUsage, llama_cpp_split
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.errors import AuthenticationError, TransientBackendError
from conli.judges import rubric as judge_module
from tests.support.scripted import JudgeAnswer

MESSAGES = [{"role": "user", "content": "grade"}]


def ask(backend: ScriptedBackend, max_reasks: int = 1):
    return ask_structured(
        backend,
        MESSAGES,
        JudgeAnswer,
        step="judge",
        template="t.v1",
        max_tokens=50,
        max_reasks=max_reasks,
    )


def test_parses_fenced_json_with_chatter_around_it():
    text = 'Sure!\n```json\n{"reasoning": "all there", "score": 5}\n```'
    assert parse_json_model(text, JudgeAnswer).score == 5


def test_out_of_range_score_is_rejected_then_reasked_once_with_the_error():
    backend = ScriptedBackend(['{"reasoning": "r", "score": 9}', '{"reasoning": "r", "score": 3}'])
    asked = ask(backend)
    assert asked.value is not None and asked.value.score == 3
    assert len(backend.calls) == 2
    reask = backend.calls[1]
    assert reask[-2] == {"role": "assistant", "content": '{"reasoning": "r", "score": 9}'}
    assert "score" in reask[-1]["content"] and "less than or equal to 5" in reask[-1]["content"]


def test_still_invalid_after_the_reask_gives_an_error_not_a_value():
    backend = ScriptedBackend(["not json", "still not json"])
    asked = ask(backend)
    assert asked.value is None
    assert asked.error is not None and "invalid answer" in asked.error
    assert len(asked.calls) == 2


def test_transient_errors_are_retried_and_auth_errors_are_not():
    good = json.dumps({"reasoning": "ok", "score": 4})
    flaky = ScriptedBackend([TransientBackendError("503"), good])
    assert ask(flaky).value is not None
    assert len(flaky.calls) == 2

    locked = ScriptedBackend([AuthenticationError("bad key"), good])
    with pytest.raises(AuthenticationError, match="bad key"):  # an error, never an answer
        ask(locked)
    assert len(locked.calls) == 1


@pytest.mark.parametrize("text", ['{"score": 4}', '{"reasoning": "x", "score": "four"}', "[]"])
def test_missing_or_mistyped_fields_never_validate(text):
    with pytest.raises(ValueError):
        parse_json_model(text, JudgeAnswer)


def test_usage_sums_the_prefill_decode_split_only_when_every_call_reported_it() -> None:
    timed = CallUsage(prompt_tokens=100, completion_tokens=10, seconds=3.0,
                      prefill_seconds=1.5, decode_seconds=1.0)
    untimed = CallUsage(prompt_tokens=50, completion_tokens=5, seconds=2.0)
    both = usage_of([CallRecord("nli", "t", timed), CallRecord("nli", "t", timed)])
    assert (both.calls, both.prompt_tokens, both.seconds) == (2, 200, 6.0)
    assert (both.prefill_seconds, both.decode_seconds) == (3.0, 2.0)
    mixed = usage_of([CallRecord("nli", "t", timed), CallRecord("nli", "t", untimed)])
    assert mixed.seconds == 5.0
    assert (mixed.prefill_seconds, mixed.decode_seconds) == (None, None)  # not a partial sum
    assert usage_of([]).prefill_seconds is None


def test_llama_cpp_timings_become_seconds_and_anything_else_none() -> None:
    split = llama_cpp_split({"prompt_ms": 1500, "predicted_ms": 250.5, "prompt_n": 9})
    assert split == {"prefill_seconds": 1.5, "decode_seconds": 0.2505}
    for odd in (None, {}, {"prompt_ms": "12", "predicted_ms": True}, [1, 2]):
        assert llama_cpp_split(odd) == {"prefill_seconds": None, "decode_seconds": None}


def test_the_judge_asks_for_errors_short_enough_that_its_score_fits_the_budget() -> None:
    backend = ScriptedBackend(['{"errors": [], "score": 5}'])
    result, _ = judge_module.judge(backend, "It opened in 1962.", "It opened in 1962.",
                                   Settings())
    assert result.status == "scored" and result.score == 5
    (schema,) = backend.schemas
    assert schema is not None
    named = schema["$defs"]["NamedError"]["properties"]
    longest = schema["properties"]["errors"]["maxItems"] * sum(
        named[field]["maxLength"] + 20 for field in ("sentence", "problem", "source"))
    # even at 3 characters a token, the capped errors and the JSON around them fit
    assert longest / 3 + 20 <= judge_module.ANSWER_TOKENS
    # validation keeps the looser limit, for backends that do not enforce the schema
    loose = JudgeErrorsAnswer.model_json_schema()["$defs"]["NamedError"]["properties"]
    assert loose["sentence"]["maxLength"] > named["sentence"]["maxLength"]

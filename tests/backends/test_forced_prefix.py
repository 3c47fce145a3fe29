"""The forced opening of a JSON answer, which the embedded backend prefills."""

import json

import pytest
from pydantic import BaseModel, Field

from conli.agents.answers import (
    NLIAnswer,
    NLIItem,
    NLIReasonedAnswer,
    NLIReasonedItem,
    RewriteAnswer,
    RewriteItem,
)
from conli.agents.structured import exact_items_schema
from conli.backends.forced_prefix import forced_prefix
from tests.support.scripted import JudgeAnswer


def _serialised(answer: BaseModel) -> str:
    return json.dumps(answer.model_dump(mode="json"))  # the spacing of our few-shot examples


def test_one_nli_item_is_forced_up_to_the_first_free_string():
    schema = exact_items_schema(NLIAnswer, "judgements", "NLIItem", [0])
    assert forced_prefix(schema) == '{"judgements": [{"id": 0, "evidence": "'
    schema = exact_items_schema(NLIReasonedAnswer, "judgements", "NLIReasonedItem", [0])
    assert forced_prefix(schema) == '{"judgements": [{"id": 0, "reasoning": "'


def test_a_choice_of_ids_stops_the_prefix_before_the_id():
    schema = exact_items_schema(NLIAnswer, "judgements", "NLIItem", [0, 1])
    assert forced_prefix(schema) == '{"judgements": [{"id": '


@pytest.mark.parametrize(
    ("schema", "answer"),
    [
        (exact_items_schema(NLIAnswer, "judgements", "NLIItem", [0]),
         NLIAnswer(judgements=[NLIItem(id=0, evidence="e", reasoning="r", label="neutral")])),
        (exact_items_schema(NLIReasonedAnswer, "judgements", "NLIReasonedItem", [0]),
         NLIReasonedAnswer(judgements=[NLIReasonedItem(id=0, reasoning="r", label="neutral")])),
        (exact_items_schema(RewriteAnswer, "rewrites", "RewriteItem", [3]),
         RewriteAnswer(rewrites=[RewriteItem(id=3, fix="f", action="remove", text="")])),
        (JudgeAnswer.model_json_schema(), JudgeAnswer(reasoning="r", score=4)),
    ],
)
def test_every_valid_answer_starts_with_the_prefix(schema, answer):
    prefix = forced_prefix(schema)
    assert prefix  # each of our answers has a forced opening
    assert _serialised(answer).startswith(prefix)


def test_optional_properties_or_unknown_shapes_force_nothing():
    class Optional(BaseModel):
        note: str = ""
        label: str

    class Numbered(BaseModel):
        count: int = Field(ge=0)

    assert forced_prefix(Optional.model_json_schema()) == ""
    assert forced_prefix(Numbered.model_json_schema()) == '{"count": '
    assert forced_prefix({"type": "array", "items": {"type": "string"}}) == ""

"""The source is prefilled once a check: every step that reads it starts as NLI does.

The NLI prompts themselves must not change (detection accuracy rests on them): their
rendered bytes are pinned by hash for fixed examples.
"""

import hashlib
import json

import pytest

from conli.prompts import Trusted, render

SOURCE = "The Riverside pool opened in 1962. It cost 2.4 million dollars."
CLAIM = "The pool opened in 1972."
# sha256 of the rendered messages (json, sorted keys), as rendered before issue 56
PINNED = {
    "nli_sentence.v1|cot|-": "160b96bd18518110e17540ae84c23507",
    "nli_sentence.v1|cot|question": "c77159c1e94ad8c80aba63f08aabdf7b",
    "nli_sentence.v1|label|-": "c88ffd0be3e2d929682c41e1ba754267",
    "nli_sentence.v1|label|question": "c9007e49cb0dd38d24e8ec93cefcb3e7",
    "nli_sentence.v2|cot|-": "37b604ec636774e24846195220df20a3",
    "nli_sentence.v2|cot|question": "36fa6d9c7d3a6315bfa099e5807ba5bd",
    "nli_sentence.v2|label|-": "c88ffd0be3e2d929682c41e1ba754267",
    "nli_sentence.v2|label|question": "c9007e49cb0dd38d24e8ec93cefcb3e7",
    "nli_sentence.v3|cot|-": "c11be9278b264339465fc57dc63bd426",
    "nli_sentence.v3|cot|question": "0400d1a42e4865f1a36500b13402540a",
    "nli_sentence.v3|label|-": "ea9c2f1c68c98dd47d0fa0797d8a4507",
    "nli_sentence.v3|label|question": "9bf5cfc6caf0024f3054d29387b1f181",
    "nli_entity.v1|cot|-": "68f76e4b09a35273ae38f0d9c8bea3bf",
    "nli_entity.v1|cot|question": "16939555555b050a88ffa3db0a620d2d",
    "nli_entity.v1|label|-": "6a085f9526ecbc58a63f0faf82419225",
    "nli_entity.v1|label|question": "de54c0edfb23d03398a7c7ee25c55cd4",
    "nli_entity.v2|cot|-": "b7323e71e7ebb4984ebfd889bd721262",
    "nli_entity.v2|cot|question": "f802e47ad5d7e2800f49765df7be3649",
    "nli_entity.v2|label|-": "6a085f9526ecbc58a63f0faf82419225",
    "nli_entity.v2|label|question": "de54c0edfb23d03398a7c7ee25c55cd4",
    "nli_entity.v3|cot|-": "0389c8e3e61b362b9f7285b4756d13ee",
    "nli_entity.v3|cot|question": "14d0f781c0a96bc8cca867cfd6489e6b",
    "nli_entity.v3|label|-": "f6cf2d659da3160b2554efa673565362",
    "nli_entity.v3|label|question": "977d1b386988e84898ee1e3d2dbc4311",
}


def _digest(template: str, cot: bool, question: str | None) -> str:
    hypotheses = [Trusted("The pool opened in [ 1972 ].")] if "entity" in template else [CLAIM]
    prompt = render(template, source=SOURCE, hypotheses=hypotheses, cot=cot, question=question)
    return hashlib.sha256(json.dumps(prompt.messages, sort_keys=True).encode()).hexdigest()[:32]


def _key(template: str, cot: bool, question: str | None) -> str:
    return f"{template}|{'cot' if cot else 'label'}|{'question' if question else '-'}"


CASES = [(f"nli_{kind}.{version}", cot, question)
         for kind in ("sentence", "entity") for version in ("v1", "v2", "v3")
         for cot in (True, False) for question in (None, "When did the pool open?")]


@pytest.mark.parametrize(("template", "cot", "question"), CASES)
def test_the_nli_prompts_render_byte_for_byte_as_before(template, cot, question):
    assert _digest(template, cot, question) == PINNED[_key(template, cot, question)]

import json

from conli.agents.nli import Hypothesis, static_prefix, tag_entity
from conli.agents.nli_prompts import resolve
from conli.backends.fake import ScriptedBackend
from tests.support.responders import claims_of, nli, nli_answer


def hyps(*texts: str) -> list[Hypothesis]:
    return [Hypothesis(i, t) for i, t in enumerate(texts)]


def test_entailment_passes_and_contradiction_and_neutral_are_hallucinations(settings):
    labels = {"A": "entailment", "B": "contradiction", "C": "neutral"}
    backend = ScriptedBackend(responder=lambda m: nli_answer([labels[c] for c in claims_of(m)], m))
    judged, calls = nli(
        backend, "src", hyps("A", "B", "C"), kind="sentence", settings=settings
    )
    assert [j.verdict for j in judged] == ["supported", "hallucinated", "hallucinated"]
    assert [j.label for j in judged] == ["entailment", "contradiction", "neutral"]
    assert len(calls) == 3  # the embedded default sends one hypothesis per call


def test_batches_follow_the_setting_and_a_skipped_hypothesis_is_asked_again(settings):
    settings.hypotheses_per_call = 3
    replies = [
        # first batch answers only two of three claims
        json.dumps(
            {
                "judgements": [
                    {"id": 0, "evidence": "q", "reasoning": "r", "label": "entailment"},
                    {"id": 2, "evidence": "", "reasoning": "r", "label": "neutral"},
                ]
            }
        ),
        nli_answer(["contradiction"]),  # follow-up for the skipped claim
    ]
    backend = ScriptedBackend(replies)
    judged, _ = nli(
        backend, "src", hyps("A", "B", "C"), kind="sentence", settings=settings
    )
    assert [j.verdict for j in judged] == ["supported", "hallucinated", "hallucinated"]
    assert claims_of(backend.calls[1]) == ["B"]


def test_a_hypothesis_never_answered_is_unverified_not_supported(settings):
    settings.hypotheses_per_call = 2

    def never_judges_b(messages):
        return json.dumps(
            {
                "judgements": [
                    {"id": i, "evidence": "q", "reasoning": "r", "label": "entailment"}
                    for i, claim in enumerate(claims_of(messages))
                    if claim != "B"
                ]
            }
        )

    backend = ScriptedBackend(responder=never_judges_b)
    judged, _ = nli(
        backend, "src", hyps("A", "B"), kind="sentence", settings=settings
    )
    assert judged[0].verdict == "supported"
    assert judged[1].verdict == "unverified"
    assert judged[1].error


def test_garbage_output_leaves_every_hypothesis_unverified(settings):
    backend = ScriptedBackend(responder=lambda m: "I think they are all fine.")
    judged, calls = nli(backend, "src", hyps("A"), kind="sentence", settings=settings)
    assert judged[0].verdict == "unverified"
    assert "invalid answer" in (judged[0].error or "")
    assert len(calls) == 2  # the answer and one bounded re-ask


def test_schema_sent_to_the_backend_demands_exactly_one_item_per_hypothesis(settings):
    settings.hypotheses_per_call = 2
    settings.nli_prompt = "v1"
    backend = ScriptedBackend(responder=lambda m: nli_answer(["entailment"] * len(claims_of(m))))
    nli(backend, "src", hyps("A", "B"), kind="sentence", settings=settings)
    schema = backend.schemas[0]
    assert schema is not None
    assert schema["properties"]["judgements"]["minItems"] == 2
    assert schema["properties"]["judgements"]["maxItems"] == 2
    item = schema["$defs"]["NLIItem"]
    assert item["properties"]["id"] == {"enum": [0, 1]}
    assert list(item["properties"]) == ["id", "evidence", "reasoning", "label"]  # label last


def test_tag_entity():
    assert tag_entity("It cost 5 dollars.", 8, 17) == "It cost [ 5 dollars ]."


def test_v2_prompt_asks_for_reasoning_then_label_and_records_its_version(settings):
    settings.nli_prompt = "v2"
    item = {"id": 0, "reasoning": "it says so", "label": "entailment"}
    answer = json.dumps({"judgements": [item]})
    backend = ScriptedBackend(responder=lambda m: answer)
    (judged,), _ = nli(backend, "src", hyps("A"), kind="entity", settings=settings)
    assert (judged.verdict, judged.reasoning, judged.evidence) == ("supported", "it says so", "")
    assert judged.template == "nli_entity.v2"
    schema = backend.schemas[0]["$defs"]["NLIReasonedItem"]
    assert list(schema["properties"]) == ["id", "reasoning", "label"]
    prompt = "".join(m["content"] for m in backend.calls[0])
    assert '"evidence"' not in prompt  # the worked examples match the answer asked for


def test_v3_sends_one_claim_per_call_and_reads_the_bare_answer(settings):
    settings.nli_prompt = "v3"
    settings.hypotheses_per_call = 3  # v3 has no batch form: one claim per call regardless
    labels = {"A": "entailment", "B": "contradiction"}

    def answer(messages):
        (claim,) = claims_of(messages)
        return json.dumps({"evidence": f"e-{claim}", "reasoning": "r", "label": labels[claim]})

    backend = ScriptedBackend(responder=answer)
    judged, calls = nli(
        backend, "src", hyps("A", "B"), kind="sentence", settings=settings
    )
    assert [(j.verdict, j.evidence) for j in judged] == [
        ("supported", "e-A"), ("hallucinated", "e-B")
    ]
    assert len(calls) == 2
    assert {j.template for j in judged} == {"nli_sentence.v3"}
    schema = backend.schemas[0]
    assert list(schema["properties"]) == ["evidence", "reasoning", "label"]  # label last
    assert "judgements" not in json.dumps(schema)


def test_v3_answer_in_the_batch_format_is_unverified(settings):
    settings.nli_prompt = "v3"
    backend = ScriptedBackend(responder=lambda m: nli_answer(["entailment"]))
    (judged,), _ = nli(backend, "src", hyps("A"), kind="sentence", settings=settings)
    assert judged.verdict == "unverified"


def test_static_prefix_follows_the_prompt_version(settings):
    settings.nli_prompt = "v1"
    v1 = static_prefix(settings)
    settings.nli_prompt = "v2"
    assert static_prefix(settings) != v1


def test_auto_prompt_is_v3_for_one_claim_calls_and_v1_for_batches(settings):
    assert settings.nli_prompt == "auto"
    assert resolve(settings, ScriptedBackend()).nli_prompt == "v3"
    assert resolve(settings, ScriptedBackend(judges_batches=True)).nli_prompt == "v1"
    settings.hypotheses_per_call = 2  # the user's batch size decides, not the backend's
    assert resolve(settings, ScriptedBackend()).nli_prompt == "v1"
    settings.nli_prompt = "v2"
    assert resolve(settings, ScriptedBackend()).nli_prompt == "v2"


def test_a_batching_backend_gets_the_batch_prompt_by_default(settings):
    backend = ScriptedBackend(
        responder=lambda m: nli_answer(["entailment"] * len(claims_of(m))), judges_batches=True
    )
    judged, calls = nli(
        backend, "src", hyps("A", "B", "C"), kind="sentence", settings=settings
    )
    assert len(calls) == 1 and {j.template for j in judged} == {"nli_sentence.v1"}

"""The whole graph through the scripted backend: detection, merge, mitigation, judge."""

import json
from dataclasses import replace

from conli.backends.fake import ScriptedBackend
from conli.judges.grounded import load_scale
from conli.pipeline import Checker
from tests.support.responders import claims_of, kind_of, nli_answer, rule_responder

SOURCE = (
    "The Riverside bridge opened in 1998. It is 240 metres long and carries two lanes. "
    "The city council paid for it with a regional grant."
)
RESPONSE = (
    "The Riverside bridge opened in 1998. It is 420 metres long and carries two lanes.\n"
    "It was designed by a famous Danish engineer. The city council paid for it with a grant."
)


def run(backend, settings, response=RESPONSE):
    return Checker(settings, backend=backend).check(SOURCE, response)


def test_flags_exactly_the_planted_sentences_and_keeps_the_rest_byte_identical(settings):
    backend = ScriptedBackend(
        responder=rule_responder(
            bad=("420", "Danish"), rewrite=lambda t: t.replace("420", "240") if "420" in t else ""
        )
    )
    result = run(backend, settings)
    verdicts = {s.text: s.verdict for s in result.sentences}
    assert verdicts == {
        "The Riverside bridge opened in 1998.": "supported",
        "It is 420 metres long and carries two lanes.": "hallucinated",
        "It was designed by a famous Danish engineer.": "hallucinated",
        "The city council paid for it with a grant.": "supported",
    }
    assert result.verdict == "hallucinated"
    assert result.refined_text == (
        "The Riverside bridge opened in 1998. It is 240 metres long and carries two lanes.\n"
        "The city council paid for it with a grant."
    )
    assert [(c.index, c.action) for c in result.mitigation.changes] == [
        (1, "rewrite"),
        (2, "remove"),
    ]
    assert result.mitigation.status == "rewritten"
    assert result.judge_raw is not None and result.judge_refined is not None
    # the default grounded judge: two unsupported additions of four sentences, then none
    assert (result.judge_raw.mode, result.judge_refined.mode) == ("grounded", "grounded")
    assert (result.judge_raw.score, result.judge_refined.score) == (load_scale()(0.375), 5)
    flagged = [s for s in result.sentences if s.verdict == "hallucinated"]
    assert all(s.reasons and s.detector == "sentence_nli" for s in flagged)


def _entity_fails(tag: str):
    def respond(messages):
        if kind_of(messages) == "nli":  # sentence level passes everything
            return nli_answer(
                ["contradiction" if tag in c else "entailment" for c in claims_of(messages)],
                messages,
            )
        return rule_responder()(messages)

    return respond


def test_entity_level_catches_what_the_sentence_level_missed(settings):
    settings.mitigate = False
    result = run(
        ScriptedBackend(responder=_entity_fails("[ 1989 ]")),
        settings,
        response="The Riverside bridge opened in 1989.",
    )
    (sentence,) = result.sentences
    assert sentence.verdict == "hallucinated" and sentence.detector == "entity_nli"
    assert {e.text: e.in_source for e in sentence.entities}["1989"] is False
    assert any("[1989]" in r for r in sentence.reasons)
    assert result.mitigation.status == "disabled"
    assert result.refined_text == "The Riverside bridge opened in 1989."


def test_entities_the_source_states_are_not_rechecked_unless_asked(settings):
    settings.mitigate = False
    backend = ScriptedBackend(responder=_entity_fails("[ 1998 ]"))
    response = "The Riverside bridge opened in 1998."
    default = run(backend, settings, response=response)
    (sentence,) = default.sentences
    assert sentence.verdict == "supported"
    assert sentence.entities and all(e.in_source for e in sentence.entities)
    assert [j.detector for j in sentence.judgements] == ["sentence_nli"]
    assert "nli_entity" not in default.usage_by_step

    settings.entity_recheck = "all"  # the paper's pattern: every tagged entity
    (sentence,) = run(backend, settings, response=response).sentences
    assert sentence.verdict == "hallucinated" and sentence.detector == "entity_nli"


def test_entity_offsets_index_the_whole_response(settings):
    backend = ScriptedBackend(responder=rule_responder())
    result = run(backend, settings)
    response_entities = [e for s in result.sentences for e in s.entities]
    assert response_entities
    for entity in response_entities:
        assert RESPONSE[entity.start : entity.end] == entity.text


def test_unparseable_answers_make_sentences_unverified_never_supported(settings):
    def respond(messages):
        return "Looks fine to me!" if kind_of(messages) == "nli" else rule_responder()(messages)

    result = run(ScriptedBackend(responder=respond), settings)
    checked = [s for s in result.sentences if s.checked]
    assert checked and all(s.verdict == "unverified" for s in checked)
    assert result.verdict == "unverified"
    assert result.mitigation.status == "nothing_flagged"
    assert all("could not be checked" in s.reasons[0] for s in checked)


def test_one_failed_entity_check_makes_a_passed_sentence_unverified(settings):
    def respond(messages):
        if kind_of(messages) == "nli":
            claims = claims_of(messages)
            if any("[ 1989 ]" in c for c in claims):
                return "garbage"
            return nli_answer(["entailment"] * len(claims), messages)
        return rule_responder()(messages)

    result = run(
        ScriptedBackend(responder=respond),
        settings,
        response="The Riverside bridge opened in 1989.",
    )
    assert result.sentences[0].verdict == "unverified"
    assert result.verdict == "unverified"


def test_nothing_flagged_skips_mitigation_and_judges_once(settings):
    backend = ScriptedBackend(responder=rule_responder())
    result = run(backend, settings, response="The Riverside bridge opened in 1998.")
    assert result.verdict == "supported"
    assert result.mitigation.status == "nothing_flagged"
    assert result.refined_text == "The Riverside bridge opened in 1998."
    assert result.judge_refined == result.judge_raw
    assert "mitigate" not in result.usage_by_step
    assert "judge" not in result.usage_by_step  # grounded: nothing flagged, nothing to ask
    assert result.judge_refined is not None and result.judge_refined.score == 5


def test_failed_mitigation_keeps_the_raw_text_and_says_so(settings):
    def respond(messages):
        return "{}" if kind_of(messages) == "mitigate" else rule_responder(bad=("420",))(messages)

    result = run(ScriptedBackend(responder=respond), settings)
    assert result.mitigation.status == "failed"
    assert result.refined_text == RESPONSE
    assert result.mitigation.error


def test_judge_failure_is_unverified_with_no_score(settings):
    def respond(messages):
        if kind_of(messages) == "judge":
            return json.dumps({"errors": [], "score": 0})
        return rule_responder()(messages)

    rubric = settings.model_copy(update={"judge_mode": "rubric"})
    result = run(ScriptedBackend(responder=respond), rubric)
    assert result.judge_refined is not None
    assert result.judge_refined.status == "unverified" and result.judge_refined.score is None


def test_result_records_templates_usage_and_timings(settings):
    result = run(ScriptedBackend(responder=rule_responder(bad=("420",))), settings)
    # one claim per call (the scripted backend's batch is 1): "auto" picks the v3 prompt
    assert {"nli_sentence.v3", "nli_entity.v3", "mitigate.v1"} <= set(result.templates)
    # the judges wrote their reasoning from the findings: no prompt, and the results say so
    assert not [t for t in result.templates if t.startswith("judge")]
    assert result.judge_raw.reasoning_by == "findings.v1"
    assert result.judge_raw.template.startswith("findings.v1+grounded_scale.")
    assert result.usage.calls == sum(u.calls for u in result.usage_by_step.values())
    assert {"split", "sentence_nli", "merge", "coverage", "judge", "total"} <= set(
        result.timings)


def test_a_rewrite_that_is_still_unsupported_is_removed_instead(settings):
    # the "fix" keeps the wrong number; re-checking the rewrite catches it
    backend = ScriptedBackend(
        responder=rule_responder(
            bad=("420",), rewrite=lambda t: t.replace("metres", "metres in total")
        )
    )
    result = run(backend, settings)
    (change,) = result.mitigation.changes
    assert change.action == "remove" and change.rewrite_verdict == "hallucinated"
    assert "still unsupported" in (change.note or "")
    assert "420" not in result.refined_text
    assert result.usage_by_step["verify_rewrite"].calls == 1


def test_a_verified_rewrite_is_kept_and_marked(settings):
    backend = ScriptedBackend(
        responder=rule_responder(bad=("420",), rewrite=lambda t: t.replace("420", "240"))
    )
    result = run(backend, settings)
    (change,) = result.mitigation.changes
    assert (change.action, change.rewrite_verdict) == ("rewrite", "supported")


def test_entity_only_ablation_sends_every_claim_to_the_entity_level(settings):
    settings.sentence_level = False
    settings.mitigate = False
    backend = ScriptedBackend(responder=rule_responder(bad=("[ 1998 ]",)))
    result = run(backend, settings, response="The Riverside bridge opened in 1998.")
    assert result.sentences[0].verdict == "hallucinated"
    assert result.sentences[0].detector == "entity_nli"
    assert "nli_sentence" not in result.usage_by_step


class FailingRecognizer:
    name = "failing"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def entities(self, text):
        raise self.error


def test_ner_that_cannot_run_fails_the_check_never_passes_it(settings):
    import pytest

    from conli.errors import AuthenticationError, TransientBackendError

    checker = Checker(settings, backend=ScriptedBackend(responder=rule_responder()))
    inputs = {"source": SOURCE, "response": "The Riverside bridge opened in 1998."}
    for error in (TransientBackendError("503 from NER"), AuthenticationError("bad key")):
        deps = replace(checker.deps, ner=FailingRecognizer(error))
        with pytest.raises(type(error)):  # a recognizer that cannot run is the check's error
            checker.graph.invoke(inputs, context=deps)

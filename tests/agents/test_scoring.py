"""One-token scoring: P(entailment) from the label token, reasoning only for failures."""

import math

from conli.agents.nli import Hypothesis
from conli.agents.nli_prompts import nli_prompt
from conli.agents.scoring import entailment_probability, label_scores, score_hypothesis
from conli.backends.base import CallUsage, Completion, TokenLogprob
from conli.backends.fake import ScriptedBackend
from tests.support.responders import claims_of, nli, nli_answer


def label_token(probabilities: dict[str, float]) -> Completion:
    top = {token: math.log(p) for token, p in probabilities.items()}
    first = max(top, key=lambda t: top[t])
    return Completion(text=first, usage=CallUsage(completion_tokens=1),
                      logprobs=(TokenLogprob(first, top[first], top),))


def reasoned(label_top: dict[str, float], label: str = "neutral") -> Completion:
    """A chain-of-thought answer as tokens, with ``label_top`` at the label's first token."""
    tokens = ['{"', "judgements", '":', ' [{"', "id", '":', " 0", ',', ' "', "evidence", '":',
              ' ""', ',', ' "', "reasoning", '":',
              ' "', "because", r' \"label\" is', " quoted", '",', ' "', "label", '":', ' "', label,
              '"}', "]}"]
    top = [{t: 0.0} for t in tokens]
    top[tokens.index(label)] = {t: math.log(p) for t, p in label_top.items()}
    return Completion(text="".join(tokens), usage=CallUsage(completion_tokens=len(tokens)),
                      logprobs=tuple(TokenLogprob(t, 0.0, alts)
                                     for t, alts in zip(tokens, top, strict=True)))


def test_label_scores_reads_the_token_after_each_label_key():
    completion = reasoned({"neutral": 0.7, "ent": 0.3})
    assert [round(s or 0, 6) for s in label_scores(completion)] == [0.3]
    assert label_scores(Completion(text="{}", usage=CallUsage())) == []


def test_entailment_probability_pools_the_label_prefixes():
    top = {"ent": math.log(0.6), " entail": math.log(0.1), "contr": math.log(0.2),
           "neutral": math.log(0.1)}
    assert abs((entailment_probability(top) or 0) - 0.7) < 1e-9


def test_no_label_mass_means_no_score():
    assert entailment_probability({"true": 0.0}) is None
    assert entailment_probability({"ent": math.log(0.2), "yes": math.log(0.7)}) is None


def test_only_hypotheses_below_the_threshold_get_chain_of_thought(settings):
    settings.score_first = True
    settings.nli_prompt = "v1"  # ``reasoned`` streams a v1 answer

    def respond(messages):
        if messages[-1]["role"] == "assistant":  # the scoring call, answer prefilled
            claim = claims_of(messages[:-1])[0]
            return label_token({"ent": 0.9, "contr": 0.1} if claim == "A" else
                               {"ent": 0.2, "neutral": 0.8})
        return reasoned({"neutral": 0.95, "ent": 0.05})

    backend = ScriptedBackend(responder=respond, continues_assistant=True, logprobs=10)
    judged, calls = nli(
        backend, "src", [Hypothesis(0, "A"), Hypothesis(1, "B")], kind="sentence",
        settings=settings)
    assert [j.verdict for j in judged] == ["supported", "hallucinated"]
    # the reasoned answer decides B, so its score is read at the reasoned label, not 0.2
    assert abs((judged[0].score or 0) - 0.9) < 1e-9 and abs((judged[1].score or 0) - 0.05) < 1e-9
    assert "because" in judged[1].reasoning  # the mitigation agent gets real reasons
    assert [c.step for c in calls] == ["score", "score", "sentence_nli"]
    reasoning_calls = [m for m in backend.calls if m[-1]["role"] != "assistant"]
    assert [claims_of(m) for m in reasoning_calls] == [["B"]]


def test_an_unreadable_score_falls_back_to_reasoning_never_to_supported(settings):
    settings.score_first = True

    def respond(messages):
        if messages[-1]["role"] == "assistant":
            return label_token({"maybe": 0.9})
        return "garbage"

    backend = ScriptedBackend(responder=respond, continues_assistant=True, logprobs=10)
    judged, _ = nli(backend, "src", [Hypothesis(0, "A")], kind="sentence", settings=settings)
    assert judged[0].verdict == "unverified" and judged[0].score is None


def test_backends_that_cannot_score_use_chain_of_thought(settings):
    settings.score_first = True
    backend = ScriptedBackend(responder=lambda m: nli_answer(["entailment"], m))
    judged, calls = nli(backend, "src", [Hypothesis(0, "A")], kind="sentence",
                        settings=settings)
    assert judged[0].verdict == "supported" and judged[0].score is None
    assert [c.step for c in calls] == ["sentence_nli"]


def test_the_scoring_call_opens_the_answer_in_the_prompt_versions_format(settings):
    settings.nli_prompt = "v3"
    backend = ScriptedBackend(responder=lambda m: label_token({"ent": 0.8, "neutral": 0.2}),
                              continues_assistant=True, logprobs=10)
    v3 = nli_prompt("v3")
    score, _ = score_hypothesis(backend, "src", "A", v3.template("sentence"), v3.label_opening,
                                settings)
    assert backend.calls[0][-1] == {"role": "assistant", "content": '{"label": "'}
    assert abs((score or 0) - 0.8) < 1e-9

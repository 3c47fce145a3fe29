"""The source is prefilled once a check: every step that reads it starts as NLI does.

The NLI prompts themselves must not change (detection accuracy rests on them): their
rendered bytes are pinned by hash for fixed examples.
"""

import hashlib
import json

import pytest

from conli.backends import register_backend
from conli.backends.fake import ScriptedBackend
from conli.cli import app as cli
from conli.judges.grounded import load_scale
from conli.pipeline import Checker
from conli.prompts import render
from conli.prompts.boundary import Trusted
from tests.support.one_slot import OneSlotCache, common, flat
from tests.support.responders import kind_of, rule_responder

SOURCE = "The Riverside pool opened in 1962. It cost 2.4 million dollars."
CLAIM = "The pool opened in 1972."
BRIDGE = ("The Riverside bridge opened in 1998. It is 240 metres long and carries two lanes "
          "of traffic. The city council paid for it with a regional grant.")
ANSWER = "The Riverside bridge opened in 1998. It is 420 metres long and carries two lanes."
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


def _checked(settings, *, batches: bool, question: str | None):
    backend = ScriptedBackend(responder=rule_responder(
        bad=("420",), rewrite=lambda t: t.replace("420", "240")), judges_batches=batches)
    shared = settings.model_copy(update={"prompt_layout": "shared", "judge_mode": "both",
                                         "judge_reasoning": "model"})
    result = Checker(shared, backend=backend).check(BRIDGE, ANSWER, question=question)
    return result, backend.calls


@pytest.mark.parametrize("batches", [False, True])  # the one-claim v3 prompt, the batch v1
@pytest.mark.parametrize("question", [None, "How long is the Riverside bridge?"])
def test_the_rewrite_and_the_rubric_judge_open_with_the_nli_prompts_source(
        settings, batches, question):
    result, calls = _checked(settings, batches=batches, question=question)
    nli = [flat(c) for c in calls if kind_of(c) == "nli"]
    source_end = nli[0].rindex("</source>")  # the examples have sources of their own
    assert BRIDGE in nli[0][:source_end]
    # the rewrite shares the question too, where there is one (the judges are not given it)
    shared_to = {"mitigate": nli[0].rindex("</question>") if question else source_end,
                 "judge": source_end, "reasoning": source_end}
    readers = {kind: [flat(c) for c in calls if kind_of(c) == kind] for kind in shared_to}
    assert all(readers.values())
    for kind, prompts in readers.items():
        for prompt in prompts:
            assert common(prompt, nli[0]) > shared_to[kind], kind
    version = "v1" if batches else "v3"
    assert result.mitigation.template == f"mitigate.v2+nli_base.{version}"
    assert result.mitigation.status == "rewritten"
    second = result.judge_raw.second_opinion
    assert second is not None and second.template == f"judge_rubric.v3+nli_base.{version}"
    assert second.status == "scored" and second.score == 2
    scale = load_scale().version
    assert result.judge_raw.template == f"judge_grounded.v2+nli_base.{version}+{scale}"
    assert result.judge_raw.reasoning_status == "checked"


def test_in_their_own_layout_they_share_nothing_of_the_source(settings):
    backend = ScriptedBackend(responder=rule_responder(
        bad=("420",), rewrite=lambda t: t.replace("420", "240")))
    both = settings.model_copy(update={"judge_mode": "both", "judge_reasoning": "model"})
    result = Checker(both, backend=backend).check(BRIDGE, ANSWER)
    nli = next(flat(c) for c in backend.calls if kind_of(c) == "nli")
    source_at = nli.index(BRIDGE)
    readers = [flat(c) for c in backend.calls
               if kind_of(c) in ("mitigate", "judge", "reasoning")]
    assert readers and all(common(prompt, nli) < source_at for prompt in readers)
    assert result.mitigation.template == "mitigate.v1"
    assert result.judge_raw.second_opinion.template == "judge_rubric.v2"
    assert result.judge_raw.template == "judge_grounded.v1+" + load_scale().version


# the model writing the reasoning: one call a flagged text, which in its own layout displaces
# the source from a one-prompt cache; written from the findings (the default), no call does
@pytest.mark.parametrize(("layout", "reasoning", "source_reads"), [
    ("shared", "model", 1), ("own", "model", 3), ("own", "findings", 1)])
def test_three_candidates_against_one_source_read_it_once(
        tmp_path, monkeypatch, capsys, layout, reasoning, source_reads):
    backend = OneSlotCache(responder=rule_responder(bad=("420",)))
    register_backend("one-slot", lambda _arg, _settings: backend)
    monkeypatch.setenv("CONLI_PROMPT_LAYOUT", layout)
    monkeypatch.setenv("CONLI_JUDGE_REASONING", reasoning)
    (tmp_path / "source.txt").write_text(BRIDGE)
    args = ["judge", "--source", str(tmp_path / "source.txt"), "--llm", "one-slot", "--json"]
    for number in range(3):  # each with a flagged sentence to reason about
        path = tmp_path / f"candidate{number}.txt"
        path.write_text(f"The Riverside bridge opened in 1998. It is 420 metres long. "
                        f"It has {number + 2} lanes.")
        args += ["--response", str(path)]
    assert cli.main(args) == 0
    texts = json.loads(capsys.readouterr().out)["texts"]
    assert [t["judge"]["status"] for t in texts] == ["scored"] * 3
    assert all(t["judge"]["reasoning_status"] == "checked" for t in texts)
    assert sum(BRIDGE in part for part in backend.prefilled) == source_reads
    assert all(t["usage"]["cached_tokens"] > 0 for t in texts)


class PrimingSlot(OneSlotCache):
    """A one-slot cache that can restore a saved prompt, as the embedded backend's ``prime``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.primed = []

    def prime(self, messages):
        self.primed.append(flat(messages))
        self.last = flat(messages)  # restored from disk: in the slot, not prefilled
        return 0.0


def test_the_rewrite_prefills_its_fixed_instructions_from_a_saved_state(settings):
    backend = PrimingSlot(responder=rule_responder(
        bad=("420",), rewrite=lambda t: t.replace("420", "240")), primes_prefix=True)
    result = Checker(settings, backend=backend).check(BRIDGE, ANSWER)
    assert result.mitigation.status == "rewritten" and result.mitigation.template == "mitigate.v1"
    rewrite = next(i for i, c in enumerate(backend.calls) if kind_of(c) == "mitigate")
    rules = "You are an editor who corrects a text"
    assert any(rules in primed for primed in backend.primed)
    assert rules not in backend.prefilled[rewrite]  # restored, not prefilled again
    assert BRIDGE in backend.prefilled[rewrite] and ANSWER in backend.prefilled[rewrite]

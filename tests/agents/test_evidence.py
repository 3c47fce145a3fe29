"""Evidence focus: each claim judged against its best-matching source sentences."""

from conli.agents.evidence import SLACK, focused_source
from conli.agents.nli import Hypothesis
from conli.config import Settings
from conli.signals.lexical import SourceWords
from tests.support.responders import nli
from tests.support.windows import reading_model, source_of

FACTS = [f"The {animal} at the zoo eats {food} every morning." for animal, food in (
    ("lion", "beef"), ("zebra", "hay"), ("otter", "fish"), ("parrot", "seeds"),
    ("gorilla", "fruit"), ("camel", "grass"), ("penguin", "krill"), ("koala", "leaves"))]
FILLER = [f"Visitors walked the {i}th path under grey skies." for i in range(20)]
SOURCE = " ".join(FACTS[:4] + FILLER + FACTS[4:])


def test_a_claim_is_shown_its_best_sentences_in_source_order() -> None:
    index = SourceWords.of(SOURCE)
    shown = focused_source(SOURCE, index, "The koala eats leaves.", 3)
    assert FACTS[7] in shown and len(SourceWords.of(shown).texts) == 3
    picked = [SOURCE.index(t) for t in SourceWords.of(shown).texts]
    assert picked == sorted(picked)  # verbatim, in the source's order
    short = " ".join(FACTS[: 3 + SLACK])
    assert focused_source(short, SourceWords.of(short), "The koala eats leaves.", 3) == short


def test_focus_judges_each_claim_on_few_sentences_and_keeps_input_order() -> None:
    backend = reading_model()
    claims = [Hypothesis(0, FACTS[6]), Hypothesis(1, "The camel at the zoo eats beef."),
              Hypothesis(2, FACTS[1])]
    settings = Settings(nli_evidence="focus", nli_focus_sentences=3)
    judged, calls = nli(backend, SOURCE, claims, kind="sentence", settings=settings)
    assert [j.verdict for j in judged] == ["supported", "hallucinated", "supported"]
    shown = [source_of(m) for m in backend.calls]
    assert len(calls) == 3 and all(len(SourceWords.of(s).texts) == 3 for s in shown)
    whole, _ = nli(reading_model(), SOURCE, claims, kind="sentence", settings=Settings())
    assert [j.verdict for j in whole] == [j.verdict for j in judged]

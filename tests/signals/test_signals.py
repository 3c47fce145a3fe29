"""The signal detector without the model: readings, features, the artifact, training, data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conli.config import Settings
from conli.errors import ConfigError
from conli.evaluation.loaders import Example
from conli.pipeline import Checker
from conli.signals.features import FEATURE_NAMES
from conli.signals.lexical import SourceWords, content_words, overlap
from conli.signals.model import SignalModel
from conli.text.nlp import load_pipeline
from conli.training.data import ExampleRows, SentenceRow
from conli.training.synthetic import synthetic_examples
from conli.training.train import fit, leave_one_dataset_out
from tests.support.signals import RESPONSE, SOURCE, Reader, model_json


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    path = tmp_path / "signals.json"
    path.write_text(json.dumps(model_json()))
    return path


def test_word_overlap_is_stemmed_and_ignores_stop_words() -> None:
    source = SourceWords.of(SOURCE)
    assert content_words("The pools were opening") == ["pool", "open"]
    found = overlap("The pool opened on Saturday with 900 visitors from Boston.", source,
                    ["Boston"])
    assert found.novel_numbers == ["900"] and found.novel_entities == ["Boston"]
    assert 0 < found.precision < 1 and found.closest == "It opened on Saturday, June 14."
    assert SourceWords.of(SOURCE).texts[0] == "The Millbrook pool cost 2.4 million dollars."


def test_the_artifact_round_trips_and_a_broken_one_is_refused() -> None:
    model = SignalModel.from_json(model_json())
    values = dict.fromkeys(FEATURE_NAMES, 0.0) | {"novel_numbers": 1.0}
    assert math.isclose(model.probability(values), 1 / (1 + math.exp(-2.0)))
    assert SignalModel.from_json(json.loads(json.dumps(model.to_json()))) == model
    with pytest.raises(ConfigError):
        SignalModel.from_json({**model_json(), "coef": [1.0]})
    with pytest.raises(ValueError):
        model.probability(values | {"lp_mean": math.nan})


def test_the_detector_flags_what_the_source_lacks_without_generating(artifact: Path) -> None:
    settings = Settings(detectors=["fast"], signal_model=artifact, mitigate=False, judge=False)
    result = Checker(settings, backend=Reader()).check(SOURCE, RESPONSE)
    first, second = result.sentences
    assert first.verdict == "supported" and second.verdict == "hallucinated"
    (judgement,) = second.judgements
    assert judgement.detector == "signals" and judgement.score is not None
    assert "Boston" in judgement.reasoning and result.usage.calls == 0


def test_a_signal_that_cannot_be_computed_is_unverified(artifact: Path) -> None:
    settings = Settings(detectors=["fast"], signal_model=artifact, mitigate=False, judge=False)
    result = Checker(settings, backend=Reader(broken=True)).check(SOURCE, RESPONSE)
    assert {s.verdict for s in result.sentences} == {"unverified"}
    assert result.verdict == "unverified"


def test_a_backend_without_hidden_states_cannot_run_the_signals() -> None:
    from conli.backends.fake import ScriptedBackend

    with pytest.raises(ConfigError, match="hidden states"):
        Checker(Settings(detectors=["fast"], judge=False), backend=ScriptedBackend()).check(
            SOURCE, RESPONSE)


def _rows(seed: int) -> list[ExampleRows]:
    """Two small datasets whose sentences differ in novel numbers, as a classifier sees them."""
    rng = np.random.default_rng(seed)
    out = []
    for dataset in ("a", "b", "c"):
        for i in range(12):
            bad = i % 2 == 1
            values = {n: float(rng.normal()) for n in FEATURE_NAMES}
            values["novel_numbers"] = float(bad) + float(rng.normal(0, 0.2))
            out.append(ExampleRows(dataset, f"{dataset}{i}", bad, [SentenceRow(0, values, bad)]))
    return out


def test_training_is_deterministic_and_scores_left_out_sets() -> None:
    first, second = fit(_rows(0), FEATURE_NAMES), fit(_rows(0), FEATURE_NAMES)
    assert first.to_json() == second.to_json()
    assert first.coef[FEATURE_NAMES.index("novel_numbers")] > 0
    held = leave_one_dataset_out(_rows(0), features=FEATURE_NAMES)
    assert [h.dataset for h in held] == ["a", "b", "c"]
    assert all(h.auroc is not None and h.auroc > 0.8 for h in held)


def test_synthetic_errors_are_labelled_and_reproducible() -> None:
    nlp = load_pipeline()
    grounded = [
        Example(f"d:{i}", SOURCE, "The pool cost 2.4 million dollars. About 800 people came.",
                False, "d")
        for i in range(6)
    ] + [Example("o:1", "Rain fell in Leeds on Monday.", "Rain fell in Leeds on Monday.",
                 False, "d")]
    made = synthetic_examples(grounded, nlp, seed=0)
    assert made == synthetic_examples(grounded, nlp, seed=0)
    assert {e.meta["synthetic"] for e in made} <= {"intrinsic", "foreign", "unsupported"}
    for example in made:
        assert example.label and example.sentence_labels
        assert sum(h for _, h in example.sentence_labels) == 1
        assert all(text in example.response for text, _ in example.sentence_labels)


def test_feature_rows_read_cot_from_the_fused_judgement_that_superseded_it() -> None:
    from conli.models import Judgement, SentenceResult
    from conli.training.data import rows_of

    text = "The pool cost 4.2 million dollars."
    example = Example("e1", SOURCE, text, True, "d")

    def result(label: str, flagged: float, nli: list[Judgement]) -> list[SentenceResult]:
        fused = Judgement(detector="fused", hypothesis=text, verdict="hallucinated",
                          label=label, features={"pmi_low": 0.3, "nli_flagged": flagged})
        return [SentenceResult(index=0, text=text, start=0, end=len(text), checked=True,
                               verdict="hallucinated", judgements=[fused, *nli])]

    row = rows_of(example, result("contradiction", 1.0, []))
    assert row is not None and row.cot_flagged()  # NLI's flag, as fused recorded it
    assert row.sentences[0].values["nli_contradiction"] == 1.0
    passed = rows_of(example, result("entailment", 0.0, []))
    assert passed is not None and not passed.cot_flagged()
    assert passed.sentences[0].values["nli_contradiction"] == 0.0
    kept = Judgement(detector="sentence_nli", hypothesis=text, verdict="supported",
                     label="entailment")
    where_kept = rows_of(example, result("contradiction", 1.0, [kept]))
    assert where_kept is not None and not where_kept.cot_flagged()  # its own judgements win

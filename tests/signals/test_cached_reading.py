"""The reading through the prompt cache (``CONLI_READING=cache``) without the model.

The reading's pass with the source must open byte for byte as the check's NLI prompt does
through the source, so a prompt cache holding the NLI calls prefills only the reading's own
task; the pass without the source is made aside; what the reading cannot compute is absent,
never made up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conli.backends.base import Capabilities
from conli.config import Settings
from conli.errors import ConfigError
from conli.models import CheckResult
from conli.pipeline import Checker
from tests.support.readers import ReadingBackend
from tests.support.signals import RESPONSE, SOURCE, Reader, model_json


def _checked(backend: ReadingBackend, **settings: object) -> CheckResult:
    chosen = Settings(detectors=["fused"], reading="cache", mitigate=False, judge=False,
                      **settings)  # type: ignore[arg-type]
    return Checker(chosen, backend=backend).check(SOURCE, RESPONSE)


def test_the_reading_opens_as_the_nli_prompt_and_finds_the_source_in_the_cache() -> None:
    backend = ReadingBackend(scores_continuations=True)
    result = _checked(backend)
    nli = backend.apply_template(backend.calls[-1], generation_prompt=False)
    through_source = nli[: nli.index("</source>") + len("</source>")]
    (with_source, aside), (without, plain_aside) = backend.scored
    assert with_source.startswith(through_source) and not aside
    assert SOURCE not in without and plain_aside  # the source's place is empty, kept aside
    assert "<source>\n\n</source>" in without
    reading = result.usage_by_step["reading"]
    assert reading.calls == 2
    # the pass with the source prefilled only what follows the cached NLI prompt's source
    assert reading.cached_tokens >= len(backend.tokenize(through_source))
    for sentence in result.sentences:
        (judgement,) = sentence.judgements
        assert "signals_read.v2+nli_base.v3+fused.v1" in (judgement.template or "")
        assert "pmi_low" in judgement.features
        assert not {"ent_mean", "align_min"} & set(judgement.features)


def test_the_forward_reading_stays_the_default() -> None:
    backend = ReadingBackend(scores_continuations=True)
    result = Checker(Settings(detectors=["fused"], mitigate=False, judge=False),
                     backend=backend).check(SOURCE, RESPONSE)
    assert backend.scored == [] and "reading" not in result.usage_by_step
    assert all("signals_read.v1" in (j.template or "") for s in result.sentences
               for j in s.judgements)


def test_a_model_needing_what_the_cached_reading_lacks_leaves_sentences_unverified(
        tmp_path: Path) -> None:
    artifact = tmp_path / "signals.json"
    artifact.write_text(json.dumps(model_json()))  # weighs every feature, entropy included
    reader = Reader()
    reader.capabilities = Capabilities(hidden_states=True, scores_continuations=True,
                                       context_window=4096)
    settings = Settings(detectors=["fast"], signal_model=artifact, reading="cache",
                        mitigate=False, judge=False)
    result = Checker(settings, backend=reader).check(SOURCE, RESPONSE)
    assert {s.verdict for s in result.sentences} == {"unverified"}
    assert all("ent_mean" in (j.error or "") for s in result.sentences for j in s.judgements)


def test_a_backend_that_cannot_score_continuations_is_refused() -> None:
    settings = Settings(detectors=["fast"], reading="cache", mitigate=False, judge=False)
    with pytest.raises(ConfigError, match="CONLI_READING=cache"):
        Checker(settings, backend=Reader()).check(SOURCE, RESPONSE)

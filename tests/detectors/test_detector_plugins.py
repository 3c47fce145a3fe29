"""A plug-in detector installed as a package declares its own settings and gets them."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from conli import detectors
from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.errors import ConfigError
from conli.pipeline import Checker
from tests.support import plugins
from tests.support.responders import rule_responder

SOURCE = "The library opened in 1962. Dr. Jones runs it."
RESPONSE = "The library opened in 1962. Dr. Jones runs it."

PLUGIN = '''
from pydantic import BaseModel, Field

from conli.detectors.base import Detection, DetectionContext
from conli.models import Judgement


class Options(BaseModel):
    """The detector's own settings."""

    word: str = Field("FALSE", min_length=1)


class FlagWord:
    """Flags every claim holding the configured word."""

    name = "flag_word"
    supersedes: frozenset[str] = frozenset()
    options = Options

    def __init__(self, options: Options) -> None:
        self.word = options.word

    def detect(self, context: DetectionContext) -> Detection:
        return Detection(judgements={c.index: [Judgement(
            detector=self.name, hypothesis=c.text,
            verdict="hallucinated" if self.word in c.text else "supported",
            reasoning=f"holds {self.word!r}")] for c in context.claims})
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``conli_flag_word`` installed: a module and its dist-info with the entry point."""
    plugins.install(tmp_path, monkeypatch, "conli_flag_word", PLUGIN, "conli.detectors",
                    "flag_word = conli_flag_word:FlagWord")
    # a fresh registry that has not read the entry points yet, restored afterwards
    monkeypatch.setattr(detectors, "_REGISTRY", dict(detectors._REGISTRY))
    monkeypatch.setattr(detectors, "_OPTIONS", dict(detectors._OPTIONS))
    monkeypatch.setattr(detectors, "_LOADED_ENTRY_POINTS", False)


def _verdicts(settings: Settings) -> list[str | None]:
    checker = Checker(settings, backend=ScriptedBackend(responder=rule_responder()))
    try:
        return [s.verdict for s in checker.check(SOURCE, RESPONSE).sentences]
    finally:
        checker.close()


def _settings(**given: object) -> Settings:
    return Settings(_env_file=None, detectors=["flag_word"], mitigate=False, judge=False,
                    **given)  # type: ignore[call-arg]


def test_a_plugin_detector_runs_with_its_own_setting(installed: None) -> None:
    assert "flag_word" in detectors.names()
    assert _verdicts(_settings()) == ["supported", "supported"]  # its default: "FALSE"
    chosen = _settings(detector_options={"flag_word": {"word": "Jones"}})
    assert _verdicts(chosen) == ["supported", "hallucinated"]


def test_its_setting_comes_from_the_environment(installed: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONLI_DETECTOR_OPTIONS__FLAG_WORD__WORD", "Jones")
    assert _verdicts(_settings()) == ["supported", "hallucinated"]
    monkeypatch.delenv("CONLI_DETECTOR_OPTIONS__FLAG_WORD__WORD")
    monkeypatch.setenv("CONLI_DETECTOR_OPTIONS", '{"flag_word": {"word": "1962"}}')
    assert _verdicts(_settings()) == ["hallucinated", "supported"]


def test_a_bad_or_stray_setting_is_refused_naming_it(installed: None) -> None:
    with pytest.raises(ConfigError, match=r"detector_options\.flag_word: word"):
        _verdicts(_settings(detector_options={"flag_word": {"word": ""}}))
    with pytest.raises(ConfigError, match="flag_word"):
        _verdicts(_settings(detector_options={"flag_word": {"colour": "red"}}))
    with pytest.raises(ConfigError, match="declares no settings"):
        _verdicts(Settings(_env_file=None, detectors=["cot"],  # type: ignore[call-arg]
                           detector_options={"sentence_nli": {"x": 1}}))
    with pytest.raises(ConfigError, match="unknown detector"):
        _verdicts(_settings(detector_options={"nobody": {}}))


def test_a_built_in_detector_that_declares_options_keeps_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Built-ins are registered through ``register``, so their options model is not lost."""
    from pydantic import BaseModel

    from conli.detectors import nli

    class Options(BaseModel):
        strict: bool = False

    class WithOptions(nli.SentenceNLI):
        options = Options

        def __init__(self, options: Options) -> None:
            super().__init__()
            self.strict = options.strict

    registry, declared = dict(detectors._REGISTRY), dict(detectors._OPTIONS)
    monkeypatch.setattr(nli, "SentenceNLI", WithOptions)
    try:
        importlib.reload(detectors)
        built = detectors.build(["sentence_nli"], {"sentence_nli": {"strict": True}})
        assert isinstance(built["sentence_nli"], WithOptions)
        assert built["sentence_nli"].strict is True
        with pytest.raises(ConfigError, match=r"detector_options\.sentence_nli"):
            detectors.build(["sentence_nli"], {"sentence_nli": {"strict": "perhaps"}})
    finally:
        monkeypatch.undo()
        importlib.reload(detectors)
        # what other tests registered (the scored and word detectors) stays registered
        detectors._REGISTRY.clear()
        detectors._REGISTRY.update(registry)
        detectors._OPTIONS.clear()
        detectors._OPTIONS.update(declared)
    assert detectors.build(["sentence_nli"])["sentence_nli"].__class__ is nli.SentenceNLI

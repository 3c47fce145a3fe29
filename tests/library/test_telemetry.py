"""``CONLI_OTEL=1``: one GenAI ``gen_ai.evaluation.result`` event per checked text.

Read back from the OpenTelemetry SDK's in-memory exporter, behind the global
``LoggerProvider`` an application would configure; the check runs on a scripted backend.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider

from conli import Checker, Settings
from conli.backends.fake import ScriptedBackend
from conli.errors import ConfigError, TransientBackendError
from conli.telemetry import MAX_EXPLANATION_CHARS
from tests.support import scripted
from tests.support.paths import ROOT

SOURCE = "The library opened in 1962. It lends books free of charge."
DETECT = {"detectors": ["cot"], "entity_level": False, "mitigate": False, "judge": False,
          "word_scores": "off"}
_EXPORTER = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
SRC = ROOT / "src" / "conli"


@pytest.fixture
def events() -> InMemoryLogRecordExporter:
    """The exporter behind the global provider (set once a process, as an app does)."""
    provider = _logs.get_logger_provider()
    if not isinstance(provider, LoggerProvider):
        provider = LoggerProvider()
        _logs.set_logger_provider(provider)
    if not getattr(provider, "_conli_test_exporter", False):
        provider.add_log_record_processor(SimpleLogRecordProcessor(_EXPORTER))
        provider._conli_test_exporter = True  # type: ignore[attr-defined]
    _EXPORTER.clear()
    return _EXPORTER


def _checker(backend: ScriptedBackend | None = None, **more: Any) -> Checker:
    return Checker(Settings(**{**DETECT, **more}),
                   backend=backend or scripted.backend())


def test_one_check_emits_one_evaluation_event(events: InMemoryLogRecordExporter) -> None:
    checker = _checker(otel=True)
    tracer = TracerProvider().get_tracer("app")
    with tracer.start_as_current_span("answer") as span:  # the app's span around the check
        result = checker.check(SOURCE, "It opened in 1962. It charges FALSE fees.")
    [emitted] = events.get_finished_logs()
    record = emitted.log_record
    assert record.event_name == "gen_ai.evaluation.result"
    assert record.span_id == span.get_span_context().span_id  # parented to the app's span
    attributes: dict[str, Any] = dict(record.attributes or {})
    assert attributes["gen_ai.evaluation.name"] == "conli.faithfulness"
    assert attributes["gen_ai.evaluation.score.label"] == result.verdict == "hallucinated"
    assert attributes["gen_ai.evaluation.score.value"] == result.support_score
    explanation = attributes["gen_ai.evaluation.explanation"]
    assert explanation.startswith("hallucinated: 1 of 2 checked sentences hallucinated")
    assert "sentence 1: contradiction" in explanation and "FALSE fees" not in explanation
    assert len(explanation) <= MAX_EXPLANATION_CHARS
    assert attributes["conli.passed"] is False
    assert attributes["conli.detectors"] == tuple(checker.deps.detectors)  # cot, resolved
    assert "sentence_nli" in attributes["conli.detectors"]
    assert attributes["conli.templates"] == tuple(result.templates)
    assert (attributes["conli.sentences.checked"], attributes["conli.sentences.hallucinated"],
            attributes["conli.sentences.unverified"]) == (2, 1, 0)
    assert attributes["conli.backend"] == "fake" and "conli.threshold" not in attributes


def test_a_failed_check_emits_its_error_type(events: InMemoryLogRecordExporter) -> None:
    broken = ScriptedBackend([TransientBackendError("503")] * 4, judges_batches=True)
    checker = _checker(broken, otel=True)
    with pytest.raises(TransientBackendError):
        checker.check(SOURCE, "It opened in 1962.")
    [emitted] = events.get_finished_logs()
    attributes = dict(emitted.log_record.attributes or {})
    assert attributes["error.type"] == "TransientBackendError"
    assert "gen_ai.evaluation.score.label" not in attributes


def test_nothing_is_emitted_with_the_setting_off(events: InMemoryLogRecordExporter) -> None:
    _checker().check(SOURCE, "It opened in 1962.")
    assert events.get_finished_logs() == ()


def test_only_the_telemetry_module_imports_opentelemetry() -> None:
    importing = [path.name for path in SRC.rglob("*.py")
                 if re.search(r"^\s*(from|import) opentelemetry", path.read_text(encoding="utf-8"),
                              re.MULTILINE)]
    assert importing == ["telemetry.py"]


def test_the_setting_without_the_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"CONLI_OTEL=1 needs OpenTelemetry: pip install"):
        _checker(otel=True)

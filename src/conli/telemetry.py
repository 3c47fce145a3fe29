"""OpenTelemetry: one GenAI ``gen_ai.evaluation.result`` event for each checked text.

Off unless ``Settings.otel`` (``CONLI_OTEL=1``). Then every result ``Checker.run_graph``
finishes (every front door's) is emitted as the log-based event OpenTelemetry's GenAI semantic
conventions define, through the global ``LoggerProvider`` the application configured, in
the current context: the event is parented to the application's span around the check, as
the conventions ask. conli configures no provider and no exporter. A check that failed
emits the event with ``error.type`` and no score. The only module that imports
OpenTelemetry (its API, the ``otel`` extra), and only once the setting is on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from conli.config import TelemetrySettings
from conli.errors import ConfigError, install_hint
from conli.models import CheckResult
from conli.version import __version__

if TYPE_CHECKING:
    from opentelemetry._logs import Logger

EVENT = "gen_ai.evaluation.result"
EVALUATION = "conli.faithfulness"  # gen_ai.evaluation.name
MAX_EXPLANATION_CHARS = 1000
_REASONS_SHOWN = 5


def emitter(settings: TelemetrySettings) -> Emitter | None:
    """The emitter ``settings`` ask for: None when off; ``ConfigError`` without the extra."""
    if not settings.otel:
        return None
    try:
        from opentelemetry import _logs
    except ImportError as exc:
        raise ConfigError(f"CONLI_OTEL=1 needs OpenTelemetry: {install_hint('otel')}") from exc
    return Emitter(_logs.get_logger("conli", __version__))


class Emitter:
    """Emits a check's result, or its failure, as one evaluation event."""

    def __init__(self, logger: Logger) -> None:
        self._logger = logger

    def result(self, result: CheckResult, detectors: Sequence[str]) -> None:
        """The event of a finished check: its verdict, support score and reasons."""
        self._emit(attributes(result, detectors))

    def failure(self, error: BaseException, detectors: Sequence[str]) -> None:
        """The event of a check that could not finish: ``error.type``, no score or label."""
        self._emit({"gen_ai.evaluation.name": EVALUATION, "error.type": type(error).__name__,
                    "conli.detectors": list(detectors)})

    def _emit(self, values: dict[str, Any]) -> None:
        from opentelemetry._logs import SeverityNumber

        self._logger.emit(event_name=EVENT, severity_number=SeverityNumber.INFO,
                          attributes=values)


def attributes(result: CheckResult, detectors: Sequence[str]) -> dict[str, Any]:
    """The event's attributes: the GenAI convention's four, then conli's own (``conli.*``).

    The score is ``support_score`` (the lowest checked sentence's P(grounded), the score
    ``passed`` is held to); the label is the verdict: supported, hallucinated or unverified.
    """
    checked = [s for s in result.sentences if s.checked]
    values: dict[str, Any] = {
        "gen_ai.evaluation.name": EVALUATION,
        "gen_ai.evaluation.score.label": result.verdict,
        "gen_ai.evaluation.explanation": explanation(result),
        "conli.passed": result.passed,
        "conli.detectors": list(detectors),
        "conli.templates": list(result.templates),
        "conli.backend": result.backend,
        "conli.model": result.model,
        "conli.sentences.checked": len(checked),
        "conli.sentences.hallucinated": sum(s.verdict == "hallucinated" for s in checked),
        "conli.sentences.unverified": sum(s.verdict == "unverified" for s in checked),
        "conli.version": __version__,
    }
    optional = {"gen_ai.evaluation.score.value": result.support_score,
                "conli.score_method": result.score_method, "conli.threshold": result.threshold}
    values.update({k: v for k, v in optional.items() if v is not None})
    return values


def explanation(result: CheckResult) -> str:
    """The verdict in a line, then the flagged or unverified sentences' reasons, bounded.

    Reasons are the detectors' own words (they may quote the source or the claim); the
    sentences' text is not added.
    """
    checked = [s for s in result.sentences if s.checked]
    worst = [s for s in checked if s.verdict == "hallucinated"] or \
        [s for s in checked if s.verdict == "unverified"]
    head = f"{result.verdict}: {len(worst)} of {len(checked)} checked sentences " \
        f"{result.verdict}" if worst else f"{result.verdict}: {len(checked)} checked sentences"
    parts = [head] + [f"sentence {s.index}: {'; '.join(s.reasons)}"
                      for s in worst[:_REASONS_SHOWN] if s.reasons]
    text = ". ".join(parts)
    if len(text) > MAX_EXPLANATION_CHARS:
        text = text[: MAX_EXPLANATION_CHARS - 1] + "…"
    return text

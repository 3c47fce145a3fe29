"""The one contract every judge mode implements: what it is given, and what it gives back.

A judge mode scores one text 1-5 from detection's verdicts on its sentences (and, if it
asks a model, the source): ``judge`` returns the ``JudgeResult`` and the model calls it
made. It never sees a text no judge may score: the dispatcher (``judges.judge_text``)
answers an emptied text, or one none of whose sentences could be checked, with the
mode's ``unscored`` record instead (never fail open), and adds the audit record to every
result. Modes are registered by name (``judges.register``), as detectors are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from conli.agents.structured import CallRecord
from conli.backends.base import Backend
from conli.config import Settings
from conli.models import JudgeResult, SentenceResult

Judged = tuple[JudgeResult, list[CallRecord]]
Unscored = Literal["emptied", "unverified"]  # a text the rewrite emptied; nothing checked


@dataclass(frozen=True)
class JudgeTask:
    """One text to score: its source, its checked sentences, and the run's backend and settings."""

    backend: Backend
    source: str
    text: str
    sentences: Sequence[SentenceResult]  # detection's verdicts on the text's sentences
    settings: Settings


class JudgeMode(Protocol):
    """Scores a text 1-5; registered by ``name`` (``judges.register``, ``--judge-mode name``)."""

    name: str

    def judge(self, task: JudgeTask) -> Judged:
        """The text's result (``scored``, or ``unverified`` with its error) and the calls made."""
        ...

    def unscored(self, task: JudgeTask, status: Unscored, why: str) -> JudgeResult:
        """The result, without a score, of a text no judge may score (``unscored_result``)."""
        ...


def unscored_result(status: Unscored, why: str, mode: Literal["grounded", "rubric"],
                    template: str) -> JudgeResult:
    """No score, and why: in ``reasoning`` for an emptied text, else in ``error``."""
    if status == "emptied":
        return JudgeResult(status=status, mode=mode, reasoning=why, template=template)
    return JudgeResult(status=status, mode=mode, error=why, template=template)


def noted(result: JudgeResult, note: str | None) -> JudgeResult:
    """``result`` with ``note`` added to its own, if it has a score the note qualifies."""
    if note is None or result.score is None:
        return result
    return result.model_copy(update={"note": "; ".join(n for n in (result.note, note) if n)})

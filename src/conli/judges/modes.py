"""The built-in judge modes: ``grounded``, ``rubric`` and ``both`` (``--judge-mode``).

- ``grounded`` (the default): the score comes from detection's sentence verdicts through
  the shipped scale (``judges.grounded``); the reasoning is written from its findings (the
  model's prose an option: ``judge_reasoning``).
- ``rubric``: the model reads the rubric and scores (``judges.rubric``); its score is then
  *bounded by detection*: a text with a flagged sentence scores at most ``FLAGGED_BOUND``
  whatever the model says (a note in the graded text cannot lift it), and the note names
  the sentence.
- ``both``: the grounded score, with the rubric judge's result beside it
  (``second_opinion``); a difference of ``REVIEW_GAP`` or more, or a rubric score the
  bound had to lower, marks the text for human review.

A score with some sentences unverified says so in its note (and, in ``both``, in
``review``). What no mode is asked to score (an emptied text, or nothing checked) each
answers with its own judge's record, without a score (``unscored``).
"""

from __future__ import annotations

from collections.abc import Sequence

from conli.judges import rubric as rubric_judge
from conli.judges.base import Judged, JudgeTask, Unscored, noted, unscored_result
from conli.judges.grounded import grounded_judge, unchecked_note
from conli.judges.grounded import template_name as grounded_template
from conli.models import JudgeResult, SentenceResult

FLAGGED_BOUND = 4.0  # the rubric's "one detail cannot be verified": the most a flagged text gets
REVIEW_GAP = 2.0  # grounded and rubric this far apart: a human should look


class Grounded:
    """The score from detection's verdicts through the scale, the reasoning from its findings."""

    name = "grounded"

    def judge(self, task: JudgeTask) -> Judged:
        """The grounded judge's result, noting any sentence that could not be checked."""
        result, calls = grounded_judge(task.backend, task.source, task.text, task.sentences,
                                       task.settings)
        return noted(result, unchecked_note(task.sentences)), calls

    def unscored(self, task: JudgeTask, status: Unscored, why: str) -> JudgeResult:
        """No score, under the grounded judge's template (with its scale's version)."""
        return unscored_result(status, why, "grounded",
                               grounded_template(task.settings, task.backend.capabilities))


class Rubric:
    """The model's rubric score, its errors on verified sentences set aside, bounded."""

    name = "rubric"

    def judge(self, task: JudgeTask) -> Judged:
        """The rubric judge's result (``rubric``)."""
        return rubric(task)

    def unscored(self, task: JudgeTask, status: Unscored, why: str) -> JudgeResult:
        """No score, under the rubric's template."""
        return unscored_result(status, why, "rubric", rubric_judge.template_name(
            task.settings, task.backend.capabilities))


class Both:
    """The grounded score with the rubric judge's beside it, and why a human should look."""

    name = "both"

    def judge(self, task: JudgeTask) -> Judged:
        """Both judges' results, the rubric's as the grounded one's ``second_opinion``."""
        first, calls = Grounded().judge(task)
        second, more = rubric(task)
        return with_second_opinion(first, second, unchecked_note(task.sentences)), calls + more

    def unscored(self, task: JudgeTask, status: Unscored, why: str) -> JudgeResult:
        """The grounded record; where nothing was checked, the reason is in ``review`` too."""
        result = Grounded().unscored(task, status, why)
        if status == "emptied":
            return result
        return result.model_copy(update={"review": [f"no judge scored the text: {why}"]})


BUILT_IN = (Grounded(), Rubric(), Both())


def rubric(task: JudgeTask) -> Judged:
    """The rubric judge, its errors on verified sentences set aside, bounded by detection."""
    result, calls = rubric_judge.judge(task.backend, task.source, task.text, task.settings)
    verified = [s.text for s in task.sentences if s.checked and s.verdict == "supported"]
    result = rubric_judge.set_aside_verified(result, task.text, verified)
    return noted(bounded(result, task.sentences), unchecked_note(task.sentences)), calls


def bounded(result: JudgeResult, sentences: Sequence[SentenceResult]) -> JudgeResult:
    """``result`` lowered to ``FLAGGED_BOUND`` where detection flagged a sentence.

    The text a judge grades cannot talk its score up past what detection found: the
    rubric's own score is kept in ``bounded_from`` and the note names the sentence.
    """
    flagged = [s for s in sentences if s.checked and s.verdict == "hallucinated"]
    if result.score is None or not flagged or result.score <= FLAGGED_BOUND:
        return result
    first = flagged[0].text if len(flagged[0].text) <= 80 else flagged[0].text[:77] + "..."
    more = f" and {len(flagged) - 1} more" if len(flagged) > 1 else ""
    note = (f"bounded at {FLAGGED_BOUND:g} from {result.score:.1f}: detection flagged "
            f'"{first}"{more}')
    notes = "; ".join(n for n in (result.note, note) if n)
    return result.model_copy(update={"score": FLAGGED_BOUND, "bounded_from": result.score,
                                     "note": notes})


def with_second_opinion(grounded: JudgeResult, second: JudgeResult,
                        unchecked: str | None = None) -> JudgeResult:
    """The grounded result with the rubric judge's beside it, and why a human should look.

    ``unchecked``: the note saying some sentences could not be checked, a reason too.
    """
    review = list(grounded.review)
    if grounded.status == "unverified":
        review.append(f"the grounded judge could not score the text: {grounded.error}")
    if unchecked:
        review.append(unchecked)
    if grounded.score is not None and second.score is not None:
        gap = abs(grounded.score - second.score)
        if gap >= REVIEW_GAP:
            review.append(f"the two judges differ by {gap:.1f}: grounded {grounded.score:.1f}, "
                          f"rubric {second.score:.1f}")
    elif second.status == "unverified":
        review.append(f"the rubric judge could not score the text: {second.error}")
    if second.bounded_from is not None:
        review.append(f"the rubric judge scored {second.bounded_from:.1f} although detection "
                      "flagged a sentence")
    return grounded.model_copy(update={"second_opinion": second, "review": review})

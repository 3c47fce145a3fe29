"""The grounded judge's reasoning as shown: written from the findings, or the model's prose.

By default (``judge_reasoning = findings``) the paragraph is written from the findings
alone (``written``), no model call: how many sentences were flagged and how (``summary``),
what the score means, then each flagged sentence quoted whole with its finding's reason.
It says nothing the findings do not, and is never cut. With ``judge_reasoning = model`` the
model's prose follows the summary only where it agrees with the findings (``agreeing``): a
sentence that restates the same words as both the text's claim and the source's (a
"contradiction" between two equal things) or that speaks of a sentence detection found
supported is dropped, and so is a trailing fragment the token limit cut, so the reasoning
ends on a full sentence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import cache

from conli.models import JudgeFinding, SentenceResult
from conli.signals.lexical import content_words, numbers

WRITER = "findings.v1"  # what a result records as written from its findings (``written``)
# Words that frame a claim ("the text states", "the source says") rather than carry it.
_FRAMING_WORDS = (
    "text source response summary answer document article claim claims claimed state states "
    "stated say says said mention mentions mentioned report reports reported indicate "
    "indicates suggest suggests actually also however instead")
_CONTRAST = re.compile(r",?\s+\b(?:while|whereas|but|however|although)\b\s+", re.IGNORECASE)
# A sentence of prose ends at a stop (and any closing quote) before a capital letter.
_BETWEEN = re.compile(r"""(?<=[.!?])\s+(?=[A-Z"“])|(?<=[.!?]["”'’)])\s+(?=[A-Z"“])""")
_ENDS_A_SENTENCE = re.compile(r"""[.!?]["'”’)\]]*$""")
# how many sentences of a severity, said of "{source}" (named once, then "it")
_SEVERITY_WORDS = {
    "contradiction": ("contradicts {source}", "contradict {source}"),
    "unsupported": ("is not supported by {source}", "are not supported by {source}"),
    "minor": ("has a minor detail {source} does not state",
              "have a minor detail {source} does not state"),
}
# one flagged sentence, as ``written`` says it; an unchecked one is counted as unsupported
_FLAGGED_AS = {
    "contradiction": "contradicts the source",
    "unsupported": "is not supported by the source",
    "minor": "has a minor detail the source does not state",
}
_UNCHECKED_AS = "could not be checked against the source, so it counts as not supported"
# a reason's opening that its severity already says: the NLI label ("contradiction: ..."),
# and for a detail the entity level flagged, "[entity] neutral: " (the entity is kept)
_SAID_BY_SEVERITY = {
    "contradiction": re.compile(r"contradiction: (?=\S)"),
    "unsupported": re.compile(r"neutral: (?=\S)"),
    "minor": re.compile(r"\[(?P<entity>[^\]]+)\] neutral: (?=\S)"),
}


def summary(findings: Sequence[JudgeFinding], checked: int) -> str:
    """The findings in one sentence: how many sentences were flagged, and how."""
    if not findings:
        return "Every checked sentence is supported by the source."
    counts = Counter(f.severity for f in findings)
    parts = [f"{n} {_SEVERITY_WORDS[severity][n != 1]}"
             for severity in ("contradiction", "unsupported", "minor")
             if (n := counts[severity])]
    parts = [part.format(source="it" if number else "the source")
             for number, part in enumerate(parts)]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    flagged = len(findings)
    return (f"{flagged} of {checked} checked sentence{'s' if checked != 1 else ''} "
            f"{'is' if flagged == 1 else 'are'} flagged: {listed}.")


def written(findings: Sequence[JudgeFinding], sentences: Sequence[SentenceResult],
            score: float, rubric_line: str) -> str:
    """The reasoning from the findings alone: their summary, the score's meaning, each one.

    ``rubric_line``: the rubric's words for the level nearest ``score`` ("name: meaning");
    only its name is said, since its meaning counts details ("one minor detail") the
    findings may not have. Each flagged sentence is quoted whole, with its finding's reason
    (less an NLI label its severity already says); an unchecked one is said to count as not
    supported.
    """
    checked = sum(1 for s in sentences if s.checked)
    level = rubric_line.partition(": ")[0]  # its name only: the rest counts details
    said = [summary(findings, checked), f"The text scores {score:.1f} of 5: {level}."]
    unchecked = {s.index for s in sentences if s.checked and s.verdict == "unverified"}
    for found in findings:
        quoted = f'"{found.sentence.strip()}"'
        if found.index in unchecked:
            said.append(_full_stop(f"{quoted} {_UNCHECKED_AS}"))
            continue
        reason = found.reason.strip()
        flagged_as = _FLAGGED_AS[found.severity]
        opening = _SAID_BY_SEVERITY[found.severity].match(reason)
        if opening:
            reason = reason[opening.end():]
            entity = opening.groupdict().get("entity")
            flagged_as += f' ("{entity}")' if entity else ""
        said.append(_full_stop(f"{quoted} {flagged_as}: {reason}"))
    return " ".join(said)


def _full_stop(sentence: str) -> str:
    """``sentence`` ending on a stop: one is added where it ends on anything else."""
    return sentence if _ENDS_A_SENTENCE.search(sentence) else sentence + "."


def agreeing(prose: str, sentences: Sequence[SentenceResult],
             findings: Sequence[JudgeFinding]) -> str:
    """The model's ``prose`` without what the findings do not say, ending on a full sentence."""
    flagged = {f.index for f in findings}
    checked = [s for s in sentences if s.checked]
    kept = []
    said_all = [s for s in (part.strip() for part in _BETWEEN.split(prose.strip())) if s]
    for number, said in enumerate(said_all):
        if number == len(said_all) - 1 and not _ENDS_A_SENTENCE.search(said):
            continue  # a fragment the token limit cut off
        if _restates_itself(said) or _about_a_supported_sentence(said, checked, flagged):
            continue
        kept.append(said)
    return " ".join(kept)


def settled(prose: str, sentences: Sequence[SentenceResult],
            findings: Sequence[JudgeFinding]) -> str:
    """The reasoning shown: the findings' summary, then the prose that agrees with them."""
    lead = summary(findings, sum(1 for s in sentences if s.checked))
    rest = agreeing(prose, sentences, findings)
    return f"{lead} {rest}" if rest else lead


@cache
def _framing() -> frozenset[str]:
    """The framing words, stemmed as claims are (on first use, not at import)."""
    return frozenset(content_words(_FRAMING_WORDS))


def _claim_words(text: str) -> set[str]:
    return set(content_words(text)) - _framing()


def _restates_itself(said: str) -> bool:
    """"The text claims X, while the source states X": a difference between equal things."""
    halves = _CONTRAST.split(said, maxsplit=1)
    if len(halves) != 2:
        return False
    first, second = halves
    if sorted(numbers(first)) != sorted(numbers(second)):
        return False  # a number differs: a real difference
    words = sorted((_claim_words(first), _claim_words(second)), key=len)
    smaller, larger = words
    return len(smaller) >= 3 and len(smaller & larger) >= 0.9 * len(smaller)


def _about_a_supported_sentence(said: str, checked: Sequence[SentenceResult],
                                flagged: set[int]) -> bool:
    """Whether ``said`` speaks of a supported sentence more than of any flagged one."""
    words = _claim_words(said)
    if len(words) < 3:
        return False
    overlap = {s.index: len(words & _claim_words(s.text)) / len(words) for s in checked}
    if not overlap:
        return False
    best = max(overlap, key=lambda index: overlap[index])
    if best in flagged or overlap[best] < 0.5:
        return False
    return all(overlap[index] < overlap[best] for index in flagged)

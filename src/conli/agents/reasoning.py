"""The grounded judge's reasoning as shown: a summary of the findings, then agreeing prose.

The score comes from the findings, so the reasoning leads with them in words
(``summary``). The model's prose follows only where it agrees with them (``agreeing``): a
sentence that restates the same words as both the text's claim and the source's (a
"contradiction" between two equal things) or that speaks of a sentence detection found
supported is dropped, and so is a trailing fragment the token limit cut, so the reasoning
ends on a full sentence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from conli.models import JudgeFinding, SentenceResult
from conli.signals.lexical import content_words, numbers

# Words that frame a claim ("the text states", "the source says") rather than carry it.
_FRAMING = frozenset(content_words(
    "text source response summary answer document article claim claims claimed state states "
    "stated say says said mention mentions mentioned report reports reported indicate "
    "indicates suggest suggests actually also however instead"))
_CONTRAST = re.compile(r",?\s+\b(?:while|whereas|but|however|although)\b\s+", re.IGNORECASE)
# A sentence of prose ends at a stop (and any closing quote) before a capital letter.
_BETWEEN = re.compile(r"""(?<=[.!?])\s+(?=[A-Z"“])|(?<=[.!?]["”'’)])\s+(?=[A-Z"“])""")
_ENDS_A_SENTENCE = re.compile(r"""[.!?]["'”’)\]]*$""")
_SEVERITY_WORDS = {
    "contradiction": ("contradicts the source", "contradict the source"),
    "unsupported": ("is not supported by it", "are not supported by it"),
    "minor": ("has a minor detail it does not state", "have a minor detail it does not state"),
}


def summary(findings: Sequence[JudgeFinding], checked: int) -> str:
    """The findings in one sentence: how many sentences were flagged, and how."""
    if not findings:
        return "Every checked sentence is supported by the source."
    counts = Counter(f.severity for f in findings)
    parts = [f"{n} {_SEVERITY_WORDS[severity][n != 1]}"
             for severity in ("contradiction", "unsupported", "minor")
             if (n := counts[severity])]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    flagged = len(findings)
    return (f"{flagged} of {checked} checked sentence{'s' if checked != 1 else ''} "
            f"{'is' if flagged == 1 else 'are'} flagged: {listed}.")


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


def _claim_words(text: str) -> set[str]:
    return set(content_words(text)) - _FRAMING


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

"""Evidence focus: show NLI the few source sentences that share most words with a claim.

A 1.5B model reads five sentences better than forty: on a long source it misses the one
sentence that entails a claim and answers ``neutral``. With ``nli_evidence = "focus"`` each
claim is judged against its ``nli_focus_sentences`` best source sentences (most shared
content words, stemmed; kept in source order, verbatim, so quoted evidence is still the
source's own words). A source not much longer than that is shown whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from conli.config import Language
from conli.signals.lexical import SourceWords, content_words

SLACK = 2  # a source at most this many sentences longer than the focus is shown whole


def focused_source(source: str, index: SourceWords, claim: str, sentences: int) -> str:
    """The source sentences that best match ``claim``, in source order (or the whole source)."""
    if len(index.texts) <= sentences + SLACK:
        return source
    wanted = set(content_words(claim, index.language))
    shared = [len(wanted & words) for words in index.sentences]
    best = sorted(range(len(shared)), key=lambda i: (-shared[i], i))[:sentences]
    return " ".join(index.texts[i] for i in sorted(best))


def group_by_focus(source: str, claims: Sequence[str], sentences: int,
                   language: Language = "en") -> dict[str, list[int]]:
    """Each focused source and the positions of the claims judged against it (in ``language``)."""
    index = SourceWords.of(source, language)
    groups: dict[str, list[int]] = {}
    for position, claim in enumerate(claims):
        groups.setdefault(focused_source(source, index, claim, sentences), []).append(position)
    return groups

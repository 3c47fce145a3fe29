"""One feature vector per sentence, from the model's reading and the words of the source.

The same function serves training (readings stored on disk) and checking (a fresh
reading), so a classifier sees the same numbers in both. A sentence with no tokens in the
reading has no vector: its check is unverified, never supported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conli.config import Language
from conli.signals.lexical import Overlap, SourceWords, overlap
from conli.text.segment import Segment

# (name, meaning); the order is the vector's.
FEATURES: tuple[tuple[str, str], ...] = (
    ("lp_mean", "mean log-probability of the sentence's tokens, read with the source"),
    ("lp_min", "lowest token log-probability with the source"),
    ("lp_low", "share of tokens below log-probability -3 with the source"),
    ("pmi_mean", "mean gain in log-probability the source gives each token"),
    ("pmi_min", "lowest such gain"),
    ("pmi_low", "share of tokens the source made less likely"),
    ("ent_mean", "mean entropy of the next-token distribution with the source"),
    ("ent_max", "highest such entropy"),
    ("log_tokens", "log of the sentence's token count"),
    ("rouge_p", "share of its content words found in the source (ROUGE-1 precision)"),
    ("best_sentence", "share of its content words found in the single closest source sentence"),
    ("novel_words", "log1p of content words the source never uses"),
    ("novel_numbers", "numbers the source never states"),
    ("novel_entities", "names the source never states word for word"),
    ("align_min", "the worst-aligned content word: its tokens' best hidden-state match among "
     "the source's tokens"),
    ("align_mean", "the mean of that alignment over the sentence's content words"),
)
FEATURE_NAMES = tuple(name for name, _ in FEATURES)
LOW_LOGPROB = -3.0


@dataclass(frozen=True)
class SentenceSignals:
    """A sentence's features and its word overlap (for reasons)."""

    index: int
    values: dict[str, float]
    overlap: Overlap

    def vector(self, names: Sequence[str] = FEATURE_NAMES) -> list[float]:
        """The values in the order ``names`` gives."""
        return [self.values[name] for name in names]


def sentence_signals(
    arrays: Mapping[str, Any],
    segments: Sequence[Segment],
    source: SourceWords,
    entities: Mapping[int, list[str]],
) -> dict[int, SentenceSignals]:
    """Features of every checked segment that has tokens in ``arrays`` (a reading).

    ``arrays`` holds the per-token arrays of ``signals.reader.ARRAYS``; ``entities`` the
    entity texts found in each segment.
    """
    import numpy as np

    owner = np.asarray(arrays["segment"])
    out: dict[int, SentenceSignals] = {}
    for segment in segments:
        if not segment.checked:
            continue
        mask = owner == segment.index
        if not mask.any():
            continue
        lp = np.asarray(arrays["logp"])[mask]
        pmi = lp - np.asarray(arrays["logp_plain"])[mask]
        words = overlap(segment.text, source, entities.get(segment.index, []))
        values = {
            "lp_mean": float(lp.mean()),
            "lp_min": float(lp.min()),
            "lp_low": float((lp < LOW_LOGPROB).mean()),
            "pmi_mean": float(pmi.mean()),
            "pmi_min": float(pmi.min()),
            "pmi_low": float((pmi < 0).mean()),
            "log_tokens": math.log(int(mask.sum())),
            "rouge_p": words.precision,
            "best_sentence": words.best_sentence,
            "novel_words": math.log1p(len(words.novel_words)),
            "novel_numbers": float(len(words.novel_numbers)),
            "novel_entities": float(len(words.novel_entities)),
            **_state_features(arrays, mask, segment, source.language),
        }
        out[segment.index] = SentenceSignals(segment.index, values, words)
    return out


def _state_features(arrays: Mapping[str, Any], mask: Any, segment: Segment,
                    language: Language) -> dict[str, float]:
    """Entropy and alignment, where the reading has them.

    A reading through the prompt cache scores only the response's own tokens, so a model
    that needs these leaves the sentence unverified.
    """
    import numpy as np

    values: dict[str, float] = {}
    if "entropy" in arrays:
        entropy = np.asarray(arrays["entropy"])[mask]
        values |= {"ent_mean": float(entropy.mean()), "ent_max": float(entropy.max())}
    if "align" in arrays:
        aligned = word_alignment(arrays, segment, language)
        values |= {"align_min": min(aligned, default=1.0),
                   "align_mean": sum(aligned) / len(aligned) if aligned else 1.0}
    return values


def word_alignment(arrays: Mapping[str, Any], segment: Segment,
                   language: Language = "en") -> list[float]:
    """Each content word of ``segment`` (in ``language``): the mean alignment of its tokens."""
    import numpy as np

    from conli.signals.lexical import words

    starts, ends = np.asarray(arrays["start"]), np.asarray(arrays["end"])
    align = np.asarray(arrays["align"], dtype=np.float64)
    found = []
    for _, start, end, _ in words(segment.text, language):
        start, end = start + segment.start, end + segment.start
        inside = (starts < end) & (ends > start)
        if inside.any():
            found.append(float(align[inside].mean()))
    return found

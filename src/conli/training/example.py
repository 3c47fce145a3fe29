"""One labelled example of a data set: what evaluation, training and calibration all read.

Kept with the training data it labels: the loaders (``evaluation.loaders``) build it, and
training and calibration read it without importing the evaluation harness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Example:
    """One (source, response) pair with its gold label; ``label`` True means hallucinated.

    ``sentence_labels`` pairs gold sentence texts with their labels where the data has them;
    ``reference`` is a faithful response to compare rewrites against, where one exists;
    ``question`` is what the response answers (HaluEval QA), which checks read with it.
    """

    id: str
    source: str
    response: str
    label: bool
    dataset: str
    sentence_labels: tuple[tuple[str, bool], ...] | None = None
    reference: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    question: str | None = None  # the question the response answers, where there is one

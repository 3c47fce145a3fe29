"""``yesno``: one token a sentence, "does the source support this claim?", on the run's model.

The checker format (MiniCheck's prompt, ``minicheck.v1``) asked of any model that gives
log-probabilities: the source comes first, so every sentence of an answer after the first
reads it from the prompt cache and costs a short prefill and one generated token. P(Yes)
is the sentence's P(supported). What differs from ``minicheck`` is the cut: a small
general model's P(Yes) is not a calibrated probability, so on the embedded model the
threshold is the one fitted on the dev sets (``signals/yesno.v1.json``, its figures held
out in docs/benchmarks.md); on other models it is 0.5 unless set.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from typing import Any

from pydantic import Field

from conli.backends.base import Backend
from conli.detectors.checkers import CheckerOptions
from conli.detectors.minicheck import MiniCheck

ARTIFACT = "yesno.v1.json"
DEFAULT_THRESHOLD = 0.5


class YesNoOptions(CheckerOptions):
    """``yesno``'s settings: a checker's, with the threshold chosen per model by default."""

    threshold: float | None = Field(  # type: ignore[assignment]
        default=None, gt=0.0, lt=1.0,
        description="P(supported) above which a claim passes (default: the threshold fitted "
                    "for the embedded model on the dev sets; 0.5 on other models)")


@lru_cache(maxsize=1)
def fitted() -> dict[str, Any]:
    """The shipped fit: threshold, the model it was fitted for, and its training manifest."""
    text = files("conli.signals").joinpath(ARTIFACT).read_text(encoding="utf-8")
    found: dict[str, Any] = json.loads(text)
    return found


class YesNo(MiniCheck):
    """Each claim against the source in the checker format, cut at the model's own threshold."""

    name = "yesno"
    label = "yes/no check"
    options = YesNoOptions

    def __init__(self, options: YesNoOptions | None = None) -> None:
        super().__init__(options or YesNoOptions())

    def threshold_for(self, backend: Backend) -> float:
        """The set threshold, else the fitted one on the model it was fitted for, else 0.5."""
        if self.settings.threshold is not None:
            return self.settings.threshold
        fit = fitted()
        if getattr(backend, "model", None) == fit["model"] and backend.name == fit["backend"]:
            return float(fit["threshold"])
        return DEFAULT_THRESHOLD

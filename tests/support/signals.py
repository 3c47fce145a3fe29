"""The signal detector's test material: a text pair, a reader with no generation call, and a
hand-made artifact."""

from __future__ import annotations

from typing import Any

from conli.backends.base import Capabilities, Completion, CompletionRequest
from conli.signals.features import FEATURE_NAMES
from conli.signals.model import SignalModel
from tests.support.readers import TinyReader

SOURCE = ("The Millbrook pool cost 2.4 million dollars. It opened on Saturday, June 14. "
          "About 800 people visited on the first day.")
RESPONSE = "The pool cost 2.4 million dollars. It was designed by a firm from Boston."


class Reader(TinyReader):
    """The forward-pass capability alone: no generation call is expected."""

    name, model = "reader", "tiny"
    capabilities = Capabilities(hidden_states=True, context_window=4096)

    def complete(self, request: CompletionRequest) -> Completion:
        raise AssertionError("the signal detector makes no generation call")

    def close(self) -> None:
        pass


def model_json(threshold: float = 0.5) -> dict[str, Any]:
    """A hand-made artifact: weight on novel numbers and missing words only."""
    weights = {"novel_numbers": 2.0, "rouge_p": -1.5, "novel_entities": 1.0}
    return SignalModel(
        version="signals.test", features=FEATURE_NAMES, mean=(0.0,) * len(FEATURE_NAMES),
        scale=(1.0,) * len(FEATURE_NAMES),
        coef=tuple(weights.get(n, 0.0) for n in FEATURE_NAMES), intercept=0.0,
        threshold=threshold, band=(0.2, 1.0), training={"note": "test"},
    ).to_json()

"""The trained signal classifier, shipped as a small versioned JSON artifact (no pickle).

A logistic regression over standardised sentence features: P(hallucinated) for each
sentence. The artifact also holds the decision threshold chosen on the dev sets, the band
of uncertain scores the hybrid detector sends to chain-of-thought NLI, and the training
manifest (data files and their SHA-256, synthetic recipe, seed, leave-one-dataset-out
scores), so what a user runs says how it was made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from conli.errors import ConfigError

ARTIFACT = Path(__file__).parent / "signals.v1.json"  # --detector fast and hybrid
FUSED_ARTIFACT = Path(__file__).parent / "fused.v1.json"  # --detector fused
QUICK_ARTIFACT = Path(__file__).parent / "quick.v1.json"  # --detector quick


@dataclass(frozen=True)
class SignalModel:
    """Standardise, weigh, squash: P(hallucinated) for one sentence's features."""

    version: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float  # flag a sentence at or above this P(hallucinated)
    band: tuple[float, float]  # hybrid: below band[0] the signals decide, else NLI does
    training: dict[str, Any] = field(default_factory=dict, compare=False)
    # fused: an NLI flag stands (P = 1) on a sentence where one of these values is above 0
    keep_nli_flag_if: tuple[str, ...] = ()

    def keeps_nli_flag(self, values: dict[str, float]) -> bool:
        """True when NLI flagged the sentence and one of ``keep_nli_flag_if`` is above 0."""
        return bool(values.get("nli_flagged")) and any(
            values[k] > 0 for k in self.keep_nli_flag_if)

    def probability(self, values: dict[str, float]) -> float:
        """P(hallucinated); ``ValueError`` if a feature is missing or not finite."""
        if self.keeps_nli_flag(values):
            return 1.0
        total = self.intercept
        for name, mean, scale, weight in zip(
            self.features, self.mean, self.scale, self.coef, strict=True
        ):
            value = values[name]
            if not math.isfinite(value):
                raise ValueError(f"signal {name} is {value}")
            total += weight * (value - mean) / scale
        return 1.0 / (1.0 + math.exp(-total))

    def to_json(self) -> dict[str, Any]:
        """The artifact's JSON form."""
        return {
            "name": self.version.split(".")[0], "version": self.version,
            "features": list(self.features),
            "mean": list(self.mean), "scale": list(self.scale), "coef": list(self.coef),
            "intercept": self.intercept, "threshold": self.threshold, "band": list(self.band),
            "keep_nli_flag_if": list(self.keep_nli_flag_if), "training": self.training,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SignalModel:
        """Read an artifact; ``ConfigError`` names what is wrong with a broken one."""
        try:
            model = cls(
                version=str(data["version"]),
                features=tuple(str(f) for f in data["features"]),
                mean=_floats(data["mean"]), scale=_floats(data["scale"]),
                coef=_floats(data["coef"]), intercept=float(data["intercept"]),
                threshold=float(data["threshold"]),
                band=(float(data["band"][0]), float(data["band"][1])),
                training=dict(data.get("training", {})),
                keep_nli_flag_if=tuple(str(k) for k in data.get("keep_nli_flag_if", ())),
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ConfigError(f"the signal model artifact is malformed: {exc}") from exc
        sizes = {len(model.features), len(model.mean), len(model.scale), len(model.coef)}
        if len(sizes) != 1 or any(s <= 0 for s in model.scale):
            raise ConfigError("the signal model artifact's vectors do not match")
        return model


def _floats(values: Sequence[Any]) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


@lru_cache(maxsize=4)
def load_model(path: Path = ARTIFACT) -> SignalModel:
    """The artifact at ``path`` (default: the one shipped with conli)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the signal model {path}: {exc}") from exc
    return SignalModel.from_json(data)

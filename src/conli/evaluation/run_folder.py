"""A detect run's folder: the manifest that pins its set-up, so a re-run resumes it.

A re-run with the same set-up continues where the last one stopped; one with another
set-up is refused rather than mixed into the same predictions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conli.config import Settings
from conli.errors import ConfigError
from conli.files import write_atomically


def claim_run_folder(out: Path, manifest: dict[str, Any]) -> None:
    """Write ``out/run.json``; ``ConfigError`` if it holds another set-up's manifest."""
    path = out / "run.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else manifest
    if _since(old, manifest) != manifest:
        raise ConfigError(f"{out} holds a run with other settings ({path}); choose another --out")
    write_atomically(path, json.dumps(manifest, indent=2) + "\n")


def _since(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``old`` with the settings added to conli since it was written, at their defaults.

    A setting that did not exist when a run started, left at its default, cannot have
    changed what the run does: resuming it stays allowed.
    """
    if not isinstance(old.get("settings"), dict):
        return old
    added = {name: value for name, value in new["settings"].items()
             if name not in old["settings"] and name in Settings.model_fields
             and value == _json_default(name)}
    return {**old, "settings": {**old["settings"], **added}}


def _json_default(name: str) -> Any:
    """A setting's default as run.json stores it."""
    default = Settings.model_fields[name].get_default(call_default_factory=True)
    return json.loads(json.dumps(default, default=str))

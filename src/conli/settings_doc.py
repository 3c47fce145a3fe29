"""docs/settings.md: the reference of every setting, generated from ``conli.config``'s groups.

Kept apart from ``conli.config`` (which only defines and reads the settings) because only
the docs, ``make settings-doc`` and the test that keeps docs/settings.md current read it.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from conli.config import (
    BackendSettings,
    BatchSettings,
    DetectionSettings,
    GenerationSettings,
    JudgeSettings,
    ProxySettings,
    RewriteSettings,
    RunSettings,
    ServiceSettings,
    TelemetrySettings,
)
from conli.config.credentials import PROVIDER_VARIABLES

# The groups of ``Settings``, by audience, in the order docs/settings.md lists them.
SETTING_GROUPS: tuple[type[BaseModel], ...] = (
    BackendSettings, DetectionSettings, RewriteSettings, JudgeSettings, RunSettings,
    GenerationSettings, ServiceSettings, ProxySettings, BatchSettings, TelemetrySettings,
)
# Defaults computed on the machine, as the reference shows them.
_SHOWN_DEFAULTS = {
    "local_threads": "the CPU count",
    "cache_dir": "`$XDG_CACHE_HOME/conli`, else `~/.cache/conli`",
}


def settings_reference() -> str:
    """docs/settings.md: every setting, by group, with its variable, default and description."""
    lines = [
        "# Settings",
        "",
        "Every setting of `conli.Settings`, grouped by who sets it (the groups of `conli.config`).",
        "Each is the environment variable `CONLI_<NAME>` or `Settings(<name>=...)` in Python; a",
        "list or mapping is given as JSON. A bad value is exit 2 with the setting named.",
        "",
        "Generated from `conli.config` by `make settings-doc`: do not edit by hand.",
    ]
    for group in SETTING_GROUPS:
        title = group.__name__.removesuffix("Settings")
        audience = (group.__doc__ or "").strip().replace("``", "`")
        lines += ["", f"## {title} (`{group.__name__}`)", "", audience, "",
                  "| variable | default | description |", "|---|---|---|"]
        for name, field in group.model_fields.items():
            default = field.get_default(call_default_factory=True)
            shown = _SHOWN_DEFAULTS.get(name) or _shown(default)
            description = (field.description or "").replace("|", "\\|")
            if get_origin(field.annotation) is Literal:
                choices = ", ".join(f"`{choice}`" for choice in get_args(field.annotation))
                description += f" (one of {choices})"
            lines.append(f"| `CONLI_{name.upper()}` | {shown} | {description} |")
    providers = ", ".join(f"`{name}`" for name in PROVIDER_VARIABLES)
    lines += ["", "## Provider variables", "",
              "Credentials and endpoints are never settings: each provider's SDK reads its own",
              "(`OPENAI_API_KEY`, `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`, ...), and conli reads",
              f"{providers}."]
    return "\n".join(lines) + "\n"


def _shown(value: Any) -> str:
    """A default as the environment spells it: JSON for lists and mappings, unset for None."""
    if value is None:
        return "unset"
    if isinstance(value, bool | list | dict):
        return f"`{json.dumps(value)}`"
    return f"`{value}`"

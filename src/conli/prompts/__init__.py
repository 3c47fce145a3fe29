"""Versioned Jinja prompt templates, rendered by one function into chat messages.

A template marks where each chat message begins with ``{{ msg("system") }}``, and where
the part that is the same on every call of a check ends with ``{{ stable() }}`` (a prompt
cache may keep what precedes it: ``Message.stable_prefix``). Markers carry a random nonce
per render, so text inside a source or response can never forge one. Variables are
strict: a missing one is an error, not an empty string. A rendered prompt names its
template's version (``spotlight.versioned``: ``<version>+datamark`` when spotlit).

Every variable is data: ``render`` passes each through the security boundary
(``prompts.boundary``: defused, datamarked when spotlit) before the template sees it.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, TemplateError

from conli.backends.base import Message
from conli.errors import ConfigError
from conli.prompts.boundary import TEMPLATE_DIR, as_data, data_filter, shipped_tags, tags_of
from conli.prompts.spotlight import RULE, mark_blocks, versioned

__all__ = ["TEMPLATE_DIR", "Prompt", "render"]
_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Prompt:
    """Rendered messages plus the template version that produced them."""

    messages: list[Message]
    template: str


def _environment(search_path: Path, tags: frozenset[str]) -> Environment:
    env = Environment(
        loader=FileSystemLoader([str(search_path), str(TEMPLATE_DIR)]),
        undefined=StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["data"] = data_filter(tags)
    return env


def render(name: str, /, *, template_dir: Path | None = None, spotlight: bool = False,
           **variables: Any) -> Prompt:
    """Render ``<name>.jinja`` (e.g. ``nli_sentence.v1``) into chat messages.

    Every variable is defused first (``as_data``), with the data tags of the shipped
    templates and of the one rendered (a user's own rubric may use tags of its own). With
    ``spotlight`` every variable is datamarked and the first system message (else the
    first message) opens with ``spotlight.RULE``; the prompt's version says so
    (``<version>+datamark``).
    """
    path = Path(name)
    if path.suffix == ".jinja":  # a user's own file, e.g. a replacement rubric
        search, filename, version = path.parent, path.name, path.stem
    else:
        search, filename, version = template_dir or TEMPLATE_DIR, f"{name}.jinja", name
    nonce = secrets.token_hex(8)
    marker = re.compile(rf"\x1e{nonce}:(\w+)\x1e")
    tags = shipped_tags()
    if search != TEMPLATE_DIR and (search / filename).is_file():
        tags |= tags_of(search / filename)
    try:
        template = _environment(search, tags).get_template(filename)
        data = {key: as_data(value, tags, name=key, spotlight=spotlight)
                for key, value in variables.items()}
        text = template.render(
            msg=lambda role: f"\x1e{nonce}:{role}\x1e", stable=lambda: f"\x1f{nonce}\x1f",
            **data,
        )
    except TemplateError as exc:
        raise ConfigError(f"prompt template {filename} failed to render: {exc}") from exc
    if spotlight:
        text = _with_rule(mark_blocks(text, tags), nonce)
    return Prompt(messages=_split_messages(text, marker, filename, f"\x1f{nonce}\x1f"),
                  template=versioned(version, spotlight))


def _with_rule(text: str, nonce: str) -> str:
    """``text`` with ``spotlight.RULE`` opening its system message (else its first message)."""
    first = (re.search(rf"\x1e{nonce}:system\x1e", text)
             or re.search(rf"\x1e{nonce}:\w+\x1e", text))
    if first is None:  # no message at all: _split_messages refuses the template
        return text
    return f"{text[:first.end()]}{RULE}\n\n{text[first.end():].lstrip()}"


def _split_messages(
    text: str, marker: re.Pattern[str], filename: str, stable: str
) -> list[Message]:
    parts = marker.split(text)
    if parts[0].strip():
        raise ConfigError(f"template {filename} has text before its first msg() marker")
    messages: list[Message] = []
    for role, content in zip(parts[1::2], parts[2::2], strict=True):
        if role not in _ROLES:
            raise ConfigError(f"template {filename} uses unknown role {role!r}")
        message: Message = {"role": role, "content": content.strip()}  # type: ignore[typeddict-item]
        if stable in message["content"]:
            message["stable_prefix"] = message["content"].index(stable)
            message["content"] = message["content"].replace(stable, "")
        messages.append(message)
    if not messages:
        raise ConfigError(f"template {filename} defines no messages")
    return messages

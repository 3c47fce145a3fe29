"""Versioned Jinja prompt templates, rendered by one function into chat messages.

A template marks where each chat message begins with ``{{ msg("system") }}``, and where
the part that is the same on every call of a check ends with ``{{ stable() }}`` (a prompt
cache may keep what precedes it: ``Message.stable_prefix``). Markers carry a random nonce
per render, so text inside a source or response can never forge one. Variables are
strict: a missing one is an error, not an empty string. User data passes through the
``data`` filter, which defuses our own delimiter tags and chat-template tokens.
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

TEMPLATE_DIR = Path(__file__).parent / "templates"
_ROLES = ("system", "user", "assistant")
_OUR_TAGS = re.compile(r"<(/?)(source|text|claim|sentence)\b", re.IGNORECASE)
# Chat-template control tokens of the model families we serve, which a tokenizer would read
# as a turn boundary: ChatML / Qwen / Llama 3 / Phi `<|...|>`, DeepSeek's full-width
# `<｜...｜>`, Gemma's turn tags, Llama 2 / Mistral's [INST] family and <s>.
_TEMPLATE_TOKENS = re.compile(
    r"<(?=[|｜])"
    r"|<(?=/?(?:start_of_turn|end_of_turn|bos|eos|s|pad|unk)>)"
    r"|<(?=<?/?SYS>>)"
    r"|\[(?=/?(?:INST|SYSTEM_PROMPT|TOOL_CALLS|AVAILABLE_TOOLS|TOOL_RESULTS|TOOL_CONTENT)\])",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Prompt:
    """Rendered messages plus the template version that produced them."""

    messages: list[Message]
    template: str


def defuse(text: str) -> str:
    """Neutralise our delimiter tags and chat-template tokens inside user data.

    The opening bracket becomes a look-alike (``‹``, ``［``), so the model still reads the
    text but no tokenizer reads a block boundary or a new chat turn in it.
    """
    text = _OUR_TAGS.sub(lambda m: f"‹{m.group(1)}{m.group(2)}", text)
    return _TEMPLATE_TOKENS.sub(lambda m: "［" if m.group() == "[" else "‹", text)


def _environment(search_path: Path) -> Environment:
    env = Environment(
        loader=FileSystemLoader([str(search_path), str(TEMPLATE_DIR)]),
        undefined=StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["data"] = defuse
    return env


def render(name: str, /, *, template_dir: Path | None = None, **variables: Any) -> Prompt:
    """Render ``<name>.jinja`` (e.g. ``nli_sentence.v1``) into chat messages."""
    path = Path(name)
    if path.suffix == ".jinja":  # a user's own file, e.g. a replacement rubric
        search, filename, version = path.parent, path.name, path.stem
    else:
        search, filename, version = template_dir or TEMPLATE_DIR, f"{name}.jinja", name
    nonce = secrets.token_hex(8)
    marker = re.compile(rf"\x1e{nonce}:(\w+)\x1e")
    try:
        template = _environment(search).get_template(filename)
        text = template.render(
            msg=lambda role: f"\x1e{nonce}:{role}\x1e", stable=lambda: f"\x1f{nonce}\x1f",
            **variables,
        )
    except TemplateError as exc:
        raise ConfigError(f"prompt template {filename} failed to render: {exc}") from exc
    return Prompt(messages=_split_messages(text, marker, filename, f"\x1f{nonce}\x1f"),
                  template=version)


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

"""A chat completions request read into what conli needs: one check, and the upstream's ask.

The body is OpenAI's ``POST /v1/chat/completions``. Its ``conli`` object (``extra_body`` in
the SDK) says what to check against and how; with no ``sources`` there, the turn's tool
messages are the sources, then the system message (where the operator allows it), then the
``X-Conli-Source`` header. The chat goes to the upstream through conli's backend contract
(``backends.base.CompletionRequest``), so every backend spec can be the upstream; that contract
carries text messages, ``max_tokens``, ``temperature`` and ``seed``. A field that would
change the reply and cannot be carried (``n`` > 1, ``tools``, ``stop``, ``top_p``, ...) is
refused by name (``UnsupportedRequestError``, a 400), never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args
from urllib.parse import unquote

from pydantic import ValidationError

from conli.backends.base import CompletionRequest as Ask
from conli.backends.base import Message
from conli.errors import ConfigError, InputError, UnsupportedRequestError, validation_problems
from conli.run.plan import RunOptions, allowed

OnFlag = Literal["annotate", "rewrite", "block"]  # laxest first: a request may only go stricter
ON_FLAG: tuple[OnFlag, ...] = get_args(OnFlag)
Found = Literal["conli", "tool", "system", "header"]
SOURCE_HEADER = "X-Conli-Source"
DEFAULT_MAX_TOKENS = 1024  # a request naming neither max_completion_tokens nor max_tokens
DEFAULT_TEMPERATURE = 1.0  # the Chat Completions API's own default
NO_SOURCE = ("no source to check the reply against: send conli.sources (extra_body in the SDK), "
             f"tool messages after the last user message, or an {SOURCE_HEADER} header")

# carried to the upstream (or read by conli); said nothing of the reply's text; and fields
# whose neutral value (or null) asks nothing the contract cannot carry
_CARRIED = frozenset({"model", "messages", "max_tokens", "max_completion_tokens", "temperature",
                      "seed", "stream", "stream_options", "conli"})
_SILENT = frozenset({"user", "metadata", "store", "service_tier", "prompt_cache_key",
                     "safety_identifier", "parallel_tool_calls"})
_NEUTRAL: dict[str, tuple[object, ...]] = {
    "n": (1,), "top_p": (1, 1.0), "presence_penalty": (0, 0.0), "frequency_penalty": (0, 0.0),
    "logprobs": (False,), "top_logprobs": (0,), "stop": ([],), "tools": ([],),
    "tool_choice": ("none", "auto"), "response_format": ({"type": "text"},),
    "logit_bias": ({},), "modalities": (["text"],),
}
_WHY = {
    "n": "conli checks one reply per request: ask n times for n replies",
    "tools": "a tool call in the reply has no text to check, and conli's backend contract "
             "carries no tools: run the tool loop against the upstream, and the final answer "
             "(with the tool results as messages) through the proxy",
    "stream_options": "only include_usage is understood",
}
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
          "tool": "user", "function": "user"}


@dataclass(frozen=True)
class Turn:
    """What a reply is checked against, and how: its sources, question and the client's choices.

    ``sources`` None: none was found (``found_in`` None). ``on_flag`` None: the operator's.
    """

    sources: list[str] | None
    found_in: Found | None
    question: str | None
    on_flag: OnFlag | None
    options: RunOptions


def parse_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object; anything else is a 400 that says why."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UnsupportedRequestError(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise UnsupportedRequestError("the body must be a JSON object (a chat completions request)")
    return body


def read_turn(body: Mapping[str, Any], header_sources: Sequence[str], *,
              system_as_source: bool) -> Turn:
    """The check the request asks for: sources from ``conli``, tools, system or the header.

    ``header_sources`` are the ``X-Conli-Source`` values, percent-encoded UTF-8.
    """
    given = body.get("conli")
    given = {} if given is None else given
    if not isinstance(given, Mapping):
        raise InputError("conli must be an object: {\"sources\": [...], \"on_flag\": ...}")
    rest = {key: value for key, value in given.items()
            if key not in ("sources", "question", "on_flag")}
    messages = chat_of(body)
    tools, asked = _turn(messages)
    question = _text_field(given, "question", asked)
    found: tuple[Found, list[str]] | None = None
    if given.get("sources") is not None:
        found = ("conli", _sources(given["sources"]))
    elif tools:
        found = ("tool", tools)
    elif system_as_source and (system := _system(messages)):
        found = ("system", [system])
    elif header_sources:
        found = ("header", [_unquoted(value) for value in header_sources])
    return Turn(sources=found[1] if found else None, found_in=found[0] if found else None,
                question=question, on_flag=_on_flag(given.get("on_flag")),
                options=_options(rest))


def upstream_ask(body: Mapping[str, Any]) -> Ask:
    """The chat the upstream is asked, through the backend contract; a 400 for what it cannot carry.

    Tool messages and an assistant's tool calls reach the upstream as text (the contract has
    text messages only): ``[tool result]`` and ``[tool call]`` lines.
    """
    for name, value in body.items():
        if name in _CARRIED or name in _SILENT:
            continue
        if name in _NEUTRAL and (value is None or value in _NEUTRAL[name]):
            continue
        why = _WHY.get(name, "conli's backend contract carries messages, max_tokens, "
                       "temperature and seed to the upstream")
        raise UnsupportedRequestError(f"{name}={json.dumps(value)[:80]} cannot be honoured: "
                                      f"{why}", param=name)
    options = body.get("stream_options") or {}
    if not isinstance(options, Mapping) or set(options) - {"include_usage"}:
        raise UnsupportedRequestError(f"stream_options: {_WHY['stream_options']}",
                                      param="stream_options")
    most = _number(body, "max_completion_tokens", int) or _number(body, "max_tokens", int)
    temperature = _number(body, "temperature", float)
    return Ask(messages=[_message(m) for m in chat_of(body)],
               max_tokens=int(most or DEFAULT_MAX_TOKENS),
               temperature=DEFAULT_TEMPERATURE if temperature is None else float(temperature),
               seed=_integer(body, "seed"))


def chat_of(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``messages``: a non-empty list of message objects, each with a known role."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise UnsupportedRequestError("messages must be a non-empty list", param="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in _ROLES:
            raise UnsupportedRequestError(
                f"messages[{i}] must be an object whose role is one of {', '.join(_ROLES)}",
                param="messages")
    return cast(list[dict[str, Any]], messages)


def streamed(body: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether the reply is asked as a stream, and with usage in its last chunk."""
    options = body.get("stream_options") or {}
    usage = isinstance(options, Mapping) and options.get("include_usage") is True
    return body.get("stream") is True, usage


def stricter(operator: OnFlag, asked: OnFlag | None) -> OnFlag:
    """The request's ``on_flag`` where it is at least as strict as the operator's; else a 400."""
    if asked is None or asked == operator:
        return operator
    if ON_FLAG.index(asked) < ON_FLAG.index(operator):
        raise UnsupportedRequestError(
            f"conli.on_flag {asked!r} is laxer than this proxy's {operator!r} "
            f"(CONLI_PROXY_ON_FLAG); a request may choose "
            f"{', '.join(ON_FLAG[ON_FLAG.index(operator):])}",
            param="conli.on_flag")
    return asked


def content_text(content: object, where: str) -> str:
    """A message's text: a string, or its text parts joined; other parts cannot be carried."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise UnsupportedRequestError(f"{where}.content must be a string or a list of parts",
                                      param="messages")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in ("text", "refusal") or not isinstance(part.get(kind), str):
            raise UnsupportedRequestError(
                f"{where} holds a {kind or 'malformed'} part: the backend contract carries text "
                "parts only", param="messages")
        texts.append(part[kind])
    return "".join(texts)


def _message(message: Mapping[str, Any]) -> Message:
    role = str(message["role"])
    text = content_text(message.get("content"), f"a {role} message")
    if role in ("tool", "function"):
        name = message.get("name") or message.get("tool_call_id") or ""
        text = f"[tool result{f' {name}' if name else ''}]\n{text}"
    calls = message.get("tool_calls") if role == "assistant" else None
    if isinstance(calls, list):
        functions = [c.get("function") or {} for c in calls if isinstance(c, Mapping)]
        text = "\n".join(t for t in [text, *(
            f"[tool call {f.get('name', '')}: {f.get('arguments', '')}]" for f in functions)] if t)
    return {"role": cast(Literal["system", "user", "assistant"], _ROLES[role]), "content": text}


def _turn(messages: list[dict[str, Any]]) -> tuple[list[str], str | None]:
    """The last turn: its tool messages' texts (those after the last user message), the question.

    The question is that user message's text (None: there is none).
    """
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    after = users[-1] + 1 if users else 0
    tools = [content_text(m.get("content"), "a tool message") for m in messages[after:]
             if m["role"] in ("tool", "function")]
    asked = content_text(messages[users[-1]].get("content"), "the user message") if users \
        else ""
    return tools, asked or None


def _system(messages: list[dict[str, Any]]) -> str | None:
    texts = [content_text(m.get("content"), "the system message") for m in messages
             if m["role"] in ("system", "developer")]
    return "\n\n".join(t for t in texts if t.strip()) or None


def _unquoted(value: str) -> str:
    """A header's source: percent-encoded UTF-8, so any text fits in a header."""
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise InputError(f"{SOURCE_HEADER} is not percent-encoded UTF-8") from None


def _sources(given: object) -> list[str]:
    if isinstance(given, str):
        return [given]
    if isinstance(given, list) and given and all(isinstance(s, str) for s in given):
        return list(given)
    raise InputError("conli.sources must be a text or a non-empty list of texts")


def _text_field(given: Mapping[str, Any], name: str, default: str | None) -> str | None:
    value = given.get(name)
    if value is not None and not isinstance(value, str):
        raise InputError(f"conli.{name} must be a text")
    return value if value is not None else default


def _on_flag(value: object) -> OnFlag | None:
    if value is not None and value not in ON_FLAG:
        raise InputError(f"conli.on_flag must be one of {', '.join(ON_FLAG)}, not {value!r}")
    return value


def _options(given: Mapping[str, Any]) -> RunOptions:
    """The per-request options of the ``conli`` object, from the proxy's allow-list."""
    try:
        allowed("proxy", given)
        return RunOptions.model_validate(given)
    except ConfigError as exc:
        raise InputError(f"conli: {exc}") from None
    except ValidationError as exc:
        raise InputError(f"conli: {validation_problems(exc.errors(), 'conli')}") from None


def _number(body: Mapping[str, Any], name: str, kind: type[int] | type[float]) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    counted = name.endswith("tokens")
    ok = isinstance(value, int | float) if kind is float else isinstance(value, int)
    if isinstance(value, bool) or not ok or (counted and value < 1):
        shape = "a positive integer" if counted else "an integer" if kind is int else "a number"
        raise UnsupportedRequestError(f"{name} must be {shape}", param=name)
    return int(value) if kind is int else float(value)


def _integer(body: Mapping[str, Any], name: str) -> int | None:
    value = _number(body, name, int)
    return None if value is None else int(value)

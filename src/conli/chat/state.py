"""A chat app's state as conli reads and writes it: LangGraph's node and LangChain's middleware.

``chat_inputs`` finds what to check in a state: the response (a key, else the last AI
message), the source (a key, else this turn's tool messages, their ``Document`` artifacts
as named chunks, else the system messages: the two common grounding patterns) and the
question. A ``context_extractor`` of the app's own replaces it. ``checked_update`` is what
a check writes back: conli's keys and the AI message replaced by the text to send, the
result under ``response_metadata["conli"]``. Both doors, ``hook.check_node`` and
``chat.middleware.check_middleware``, share them. LangChain is never imported here: messages are
read by their ``type``/``role``, ``content`` and ``artifact``, objects or dicts alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

from conli.config import Settings
from conli.errors import ConfigError, InputError, UnsupportedAnswerError
from conli.graph.state import NodeOutput
from conli.models import CheckResult
from conli.run.documents import is_document
from conli.run.request import RunRequest

OnFlag = Literal["annotate", "raise"]
ON_FLAG: tuple[OnFlag, ...] = ("annotate", "raise")
# What a chat node sends when the rewrite removed every sentence: never an empty message.
DECLINED = "I could not give an answer that the source supports."


class ChatInputs(NamedTuple):
    """What a check reads from a chat state: source (texts or Documents), response, question.

    A ``context_extractor`` returns one (``points``, optional, as ``Checker.check`` takes them).
    """

    source: object
    response: object
    question: str | None = None
    points: object = None

    def request(self, limits: Settings) -> RunRequest:
        """These inputs as the check's ``RunRequest``, validated within ``limits``."""
        return RunRequest.of(self.source, self.response, question=self.question,
                             points=self.points, limits=limits)


# An app's own reading of its state: (state) -> ChatInputs (the middleware also allows None).
ContextExtractor = Callable[[Mapping[str, Any]], "ChatInputs | None"]


def checked_on_flag(on_flag: str) -> None:
    """``ConfigError`` for an ``on_flag`` other than annotate or raise."""
    if on_flag not in ON_FLAG:
        raise ConfigError(f"on_flag must be one of {', '.join(ON_FLAG)}, not {on_flag!r}")


def sent(result: CheckResult, *, declined: str = DECLINED) -> str:
    """The text a chat node sends after ``result``: the rewrite (or the answer as written).

    When the rewrite removed every sentence, ``declined``: never an empty message. An
    unverified or a detect-only hallucinated answer goes out as written, and its
    ``response_metadata["conli"]`` says so (``on_flag="raise"`` stops it instead).
    """
    return reply_text(result) or declined


def messages_update(messages: object, result: CheckResult, *,
                    declined: str = DECLINED) -> list[Any] | None:
    """The ``messages`` update that replaces the checked AI message; None without one.

    LangChain messages with ids (``MessagesState``'s ``add_messages`` gives each one): the
    one message, same id, so the reducer replaces it. Otherwise (dicts, or no ids) the whole
    list with that message replaced, for a ``messages`` key without that reducer.
    """
    chat = list(messages) if isinstance(messages, list | tuple) else []
    at = next((i for i in range(len(chat) - 1, -1, -1) if _role(chat[i]) == "ai"), None)
    if at is None:
        return None
    checked = chat[at]
    annotation = {"conli": result.model_dump(mode="json")}
    text = sent(result, declined=declined)
    if isinstance(checked, Mapping):
        meta = checked.get("response_metadata")
        replaced: Any = {**checked, "content": text,
                         "response_metadata": {**(meta if isinstance(meta, Mapping) else {}),
                                               **annotation}}
    else:
        meta = getattr(checked, "response_metadata", None)
        replaced = checked.model_copy(update={  # a LangChain message: a pydantic model
            "content": text,
            "response_metadata": {**(meta if isinstance(meta, Mapping) else {}), **annotation}})
        if getattr(checked, "id", None):
            return [replaced]
    return [*chat[:at], replaced, *chat[at + 1:]]


_ROLES = {"human": "human", "user": "human", "ai": "ai", "assistant": "ai",
          "tool": "tool", "function": "tool", "system": "system", "developer": "system"}


def _role(message: object) -> str | None:
    """``human``, ``ai``, ``tool`` or ``system`` for a LangChain message object or a dict."""
    kind = _field(message, "role") or _field(message, "type")
    return _ROLES.get(kind) if isinstance(kind, str) else None


def _field(message: object, name: str) -> object:
    return message.get(name) if isinstance(message, Mapping) else getattr(message, name, None)


def _text(message: object) -> str:
    """A message's text: its string content, or its text blocks joined."""
    content = _field(message, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(block if isinstance(block, str) else str(block.get("text", ""))
                       for block in content
                       if isinstance(block, str) or (isinstance(block, Mapping)
                                                     and block.get("type") == "text"))
    return ""


def last_answer(state: Mapping[str, Any]) -> object:
    """The last AI message of ``state["messages"]`` (None without one)."""
    messages = state.get("messages")
    chat = list(messages) if isinstance(messages, list | tuple) else []
    return next((m for m in reversed(chat) if _role(m) == "ai"), None)


def turn_sources(chat: list[Any], roles: list[str | None], after: int) -> list[object]:
    """The turn's sources: its tool messages, else the system messages.

    Each tool message after the last human one is a chunk (a retriever tool's ``Document``
    artifacts are each a named chunk); without any tool message, each system message is.
    """
    found: list[object] = []
    for message, role in zip(chat[after:], roles[after:], strict=True):
        if role != "tool":
            continue
        artifact = _field(message, "artifact")
        if isinstance(artifact, list | tuple) and artifact and all(map(is_document, artifact)):
            found.extend(artifact)  # a retriever tool's documents (content_and_artifact)
        else:
            found.append(_text(message))
    if found:
        return found
    return [_text(m) for m, role in zip(chat, roles, strict=True) if role == "system"]


def chat_inputs(
    state: Mapping[str, Any], *, response_key: str = "response", source_key: str = "source",
) -> ChatInputs:
    """``(source, response, question, points)`` as ``check_node`` reads them from ``state``.

    Explicit keys win when the state has them (even empty: ``check`` then refuses them);
    otherwise they come from ``messages``: the last AI message, and this turn's tool
    messages or else the system messages (``turn_sources``). Raises ``InputError`` naming
    the state's keys when the state gives no response or no source at all.
    """
    messages = state.get("messages")
    chat = list(messages) if isinstance(messages, list | tuple) else []
    roles = [_role(m) for m in chat]
    humans = [i for i, role in enumerate(roles) if role == "human"]
    if response_key in state:
        response: object = state[response_key]
    else:
        answer = last_answer(state)
        response = None if answer is None else _text(answer)
    if source_key in state:
        source: object = state[source_key]
    else:
        found = turn_sources(chat, roles, humans[-1] + 1 if humans else 0)
        source = (found[0] if len(found) == 1 else found) if found else None
    question = state.get("question")
    if question is None and humans:
        question = _text(chat[humans[-1]]) or None
    missing = [name for name, value in (("response", response), ("source", source))
               if value is None]
    if missing:
        raise InputError(
            f"found no {' and no '.join(missing)} in the state (its keys: "
            f"{sorted(map(str, state))}); the response is read from {response_key!r}, else "
            f"the last AI message in 'messages', and the source from {source_key!r}, else "
            "the tool messages after the last human message, else the system messages; or "
            "give a context_extractor")
    return ChatInputs(source, response, question if isinstance(question, str) else None,
                      state.get("points"))


def answers_last(state: Mapping[str, Any], response: object) -> bool:
    """Whether ``response`` is the text of the state's last AI message (the one to replace)."""
    answer = last_answer(state)
    return answer is not None and _text(answer) == response


def checked_update(state: Mapping[str, Any], result: CheckResult, *, replace: bool,
                   on_flag: OnFlag, declined: str, door: str) -> NodeOutput:
    """What a check writes into ``state``: conli's keys, and (``replace``) the AI message.

    The message update (``messages_update``) replaces the last AI message with the text to
    send. ``on_flag="raise"`` raises ``UnsupportedAnswerError`` (its ``.result``) instead
    when the verdict is not ``supported``; ``door`` names the caller in its message.
    """
    if on_flag == "raise" and result.verdict != "supported":
        raise UnsupportedAnswerError(
            f"the answer is {result.verdict}, not supported by its source ({door}); the "
            "result is on this error's .result",
            verdict=result.verdict, result=result.model_dump(mode="json"))
    output = node_output(result)
    if replace:
        update = messages_update(state.get("messages"), result, declined=declined)
        if update is not None:
            output["messages"] = update
    return output


def reply_text(result: CheckResult | Mapping[str, object]) -> str | None:
    """The text to send after a check: the rewrite, or None when it is empty.

    ``result`` is a ``CheckResult`` or the state ``check_node`` wrote (its ``check_result``,
    else its ``refined_text``). When every sentence was removed the rewrite is empty: None
    tells the app to fall back (a refusal, say) rather than send an empty message.
    """
    if not isinstance(result, CheckResult):
        whole = result.get("check_result")
        text = (whole.refined_text if isinstance(whole, CheckResult)
                else result.get("refined_text"))
    else:
        text = result.refined_text
    return text.strip() if isinstance(text, str) and text.strip() else None


def node_output(result: CheckResult) -> NodeOutput:
    """The state keys the node writes, from the front doors' result."""
    return NodeOutput(
        verdict=result.verdict,
        support_score=result.support_score,
        sentences=result.sentences,
        refined_text=result.refined_text,
        mitigation=result.mitigation,
        judge_raw=result.judge_raw,
        judge_refined=result.judge_refined,
        coverage=result.coverage,
        word_scores=result.word_scores,
        check_result=result,
    )

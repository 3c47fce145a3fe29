"""conli as a LangChain agent middleware: each answer checked right after the model writes it.

``check_middleware(checker)`` is an ``AgentMiddleware`` for ``langchain.agents.create_agent``
(the ``[langchain]`` extra; LangChain is imported here only), beside ``check_node`` for a
LangGraph app's own graph. Its ``after_model`` hook checks the agent's answer against this
turn's sources as the node reads them (``chat.state.chat_inputs``: a retriever tool's messages and
their ``Document`` artifacts, else the system prompt), or against what the app's
``context_extractor(state)`` returns. ``exit_behavior``:

- ``"continue"`` (default): the AI message is replaced by the text to send (the rewrite
  when a sentence was rewritten; the answer as written when supported, unverified or only
  detected; ``declined`` when the rewrite removed every sentence), the whole result under
  its ``response_metadata["conli"]`` and in the state's ``conli`` key; the agent goes on.
- ``"error"``: ``UnsupportedAnswerError`` (its ``.verdict`` and ``.result``) when the
  verdict is not ``supported``, ending the run.

A model message that calls tools is not an answer: it goes on unchecked. ``create_agent``
keeps its ``system_prompt`` out of the state's messages, so ``wrap_model_call`` records the
system message the model was called with (a private state key) for ``after_model`` to read.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal, NotRequired

from conli.chat.state import (
    DECLINED,
    ChatInputs,
    ContextExtractor,
    OnFlag,
    answers_last,
    chat_inputs,
    checked_update,
    last_answer,
)
from conli.config import Settings
from conli.errors import ConfigError, InputError, install_hint
from conli.models import CheckResult
from conli.pipeline import Checker
from conli.run.context import on_pool
from conli.run.plan import make_plan
from conli.run.request import RunRequest

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
    )
    from langchain.agents.middleware.types import PrivateStateAttr
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ConfigError(f"conli's agent middleware needs LangChain's agents (langchain>=1.5): "
                      f"{install_hint('langchain')} ({exc})") from exc

ExitBehavior = Literal["continue", "error"]
EXIT_BEHAVIORS: tuple[ExitBehavior, ...] = ("continue", "error")
SYSTEM_KEY = "conli_system_prompt"  # the system message of the last model call


class ConliAgentState(AgentState[Any]):
    """The agent's state with conli's keys: the last check's result and the system prompt."""

    conli: NotRequired[dict[str, Any]]
    conli_system_prompt: NotRequired[Annotated[str | None, PrivateStateAttr]]


class CheckMiddleware(AgentMiddleware[ConliAgentState, Any]):
    """Checks the agent's answer after each model call (``check_middleware`` builds it)."""

    state_schema = ConliAgentState

    def __init__(self, checker: Checker, *, settings: Settings | None = None,
                 exit_behavior: ExitBehavior = "continue", declined: str = DECLINED,
                 context_extractor: ContextExtractor | None = None) -> None:
        super().__init__()
        if exit_behavior not in EXIT_BEHAVIORS:
            raise ConfigError(f"exit_behavior must be one of {', '.join(EXIT_BEHAVIORS)}, "
                              f"not {exit_behavior!r}")
        self.checker = checker
        self.exit_behavior, self.declined = exit_behavior, declined
        self.context_extractor = context_extractor
        self._plan = None if settings is None else make_plan(settings)

    @property
    def name(self) -> str:
        """The middleware's node name in the agent's graph."""
        return "conli"

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
                        ) -> ExtendedModelResponse[Any]:
        """Call the model; record the system message it was called with (a source)."""
        return _recorded(request, handler(request))

    async def awrap_model_call(
        self, request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """Async ``wrap_model_call``."""
        return _recorded(request, await handler(request))

    def after_model(self, state: ConliAgentState, runtime: Any) -> dict[str, Any] | None:
        """Check the answer the model just wrote (None: a tool call, nothing to check)."""
        read = self._read(state)
        if read is None:
            return None
        request, replace = read
        return self._update(state, self.checker.run(request, plan=self._plan), replace)

    async def aafter_model(self, state: ConliAgentState,
                           runtime: Any) -> dict[str, Any] | None:
        """Async ``after_model``: on the checker's pool; a cancelled run starts no model call."""
        read = self._read(state)
        if read is None:
            return None
        request, replace = read
        result = await on_pool(self.checker.executor(), functools.partial(
            self.checker.run, request, plan=self._plan))
        return self._update(state, result, replace)

    def _read(self, state: Mapping[str, Any]) -> tuple[RunRequest, bool] | None:
        """The check's request and whether the answer is the AI message; None: none to check."""
        answer = last_answer(state)
        if answer is not None and getattr(answer, "tool_calls", None):
            return None  # the model asks for a tool: its answer comes later
        if self.context_extractor is not None:
            given = self.context_extractor(state)
            if given is None:
                return None  # the app's own reading says there is nothing to check
            if not isinstance(given, ChatInputs):
                raise InputError(f"the context_extractor returned {type(given).__name__}, "
                                 "not ChatInputs(source, response, ...) or None")
            return given.request(self._limits()), answers_last(state, given.response)
        system = state.get(SYSTEM_KEY)
        messages = list(state.get("messages") or [])
        if system and not any(getattr(m, "type", None) == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": system})
        inputs = chat_inputs({**state, "messages": messages})
        return inputs.request(self._limits()), "response" not in state

    def _limits(self) -> Settings:
        """The settings the texts are validated within: its own plan's, else the checker's."""
        return (self._plan if self._plan is not None else self.checker.plan).settings

    def _update(self, state: Mapping[str, Any], result: CheckResult,
                replace: bool) -> dict[str, Any]:
        on_flag: OnFlag = "raise" if self.exit_behavior == "error" else "annotate"
        output = checked_update(state, result, replace=replace, on_flag=on_flag,
                                declined=self.declined,
                                door="conli middleware exit_behavior='error'")
        update: dict[str, Any] = {"conli": result.model_dump(mode="json")}
        if "messages" in output:
            update["messages"] = output["messages"]
        return update


def _recorded(request: ModelRequest[Any],
              response: ModelResponse[Any] | Any) -> ExtendedModelResponse[Any]:
    """The model's response, with the system message it was called with as a state update."""
    system = request.system_message
    prompt = None if system is None else system.text
    if isinstance(response, ExtendedModelResponse):
        return response  # an inner middleware's update: left as it is
    answered = response if isinstance(response, ModelResponse) else ModelResponse(
        result=[response])
    return ExtendedModelResponse(model_response=answered,
                                 command=Command(update={SYSTEM_KEY: prompt or None}))


def check_middleware(
    checker: Checker,
    *,
    settings: Settings | None = None,
    exit_behavior: ExitBehavior = "continue",
    declined: str = DECLINED,
    context_extractor: ContextExtractor | None = None,
) -> CheckMiddleware:
    """The check as a middleware: ``create_agent(..., middleware=[check_middleware(checker)])``.

    ``settings`` override the checker's for these checks (e.g. detect only), as in
    ``check_node``; ``context_extractor(state)`` returns the ``ChatInputs`` to check (None:
    nothing to check after this model call). See the module's docstring for what it reads
    and writes, and ``exit_behavior``.
    """
    return CheckMiddleware(checker, settings=settings, exit_behavior=exit_behavior,
                           declined=declined, context_extractor=context_extractor)

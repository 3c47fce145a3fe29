"""conli as a node of a host LangGraph app: input checks, deadline, verdict, host context.

Also runs ``examples/langgraph_post_edit.py`` end to end with a scripted backend.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime

from conli import Checker, Settings, check_node
from conli.backends.base import Message
from conli.backends.fake import Reply, ScriptedBackend
from conli.errors import ConfigError, DeadlineExceededError, EmptyInputError, InputError
from conli.hook import reply_text
from conli.models import Mitigation, SentenceResult, Verdict
from tests.support import scripted
from tests.support.paths import ROOT
from tests.support.responders import rule_responder
from tests.support.scripts import load_script

SOURCE = "The library opened in 1962. It is run by the city council."
GOOD = "The library opened in 1962."
BAD = "The library opened in 1962. It is run by a FALSE charity."


@dataclass(frozen=True)
class HostContext:
    """A host app's own runtime context, nothing like conli's."""

    user: str


class HostState(TypedDict, total=False):
    source: str
    response: str
    verdict: Verdict
    sentences: list[SentenceResult]
    refined_text: str
    mitigation: Mitigation
    greeting: str


def greet(state: HostState, runtime: Runtime[HostContext]) -> dict[str, Any]:
    """A host node that needs the host's context."""
    return {"greeting": f"hello {runtime.context.user}"}


def host_app(conli_node: Any, *, checkpointer: Any = None) -> Any:
    app = StateGraph(HostState, context_schema=HostContext)
    app.add_node("greet", greet)
    app.add_node("conli", conli_node)
    app.add_edge(START, "greet")
    app.add_edge("greet", "conli")
    app.add_edge("conli", END)
    return app.compile(checkpointer=checkpointer)


def checker(**settings: Any) -> Checker:
    return Checker(Settings(_env_file=None, **settings), backend=scripted.backend())


def test_the_node_runs_in_a_host_with_its_own_context_and_returns_the_verdict() -> None:
    state = host_app(check_node(checker())).invoke(
        {"source": SOURCE, "response": BAD}, context=HostContext(user="ada"))
    assert state["greeting"] == "hello ada"  # the host's context reached the host's node
    assert state["verdict"] == "hallucinated"
    assert [s.verdict for s in state["sentences"]] == ["supported", "hallucinated"]
    assert state["refined_text"] == "The library opened in 1962. It is run by a true charity."
    assert state["mitigation"].status == "rewritten"


def test_a_supported_response_comes_back_supported() -> None:
    state = host_app(check_node(checker())).invoke(
        {"source": SOURCE, "response": GOOD}, context=HostContext(user="ada"))
    assert state["verdict"] == "supported"
    assert state["refined_text"] == GOOD


def test_the_node_runs_in_an_async_host() -> None:
    app = host_app(check_node(checker()))
    state = asyncio.run(app.ainvoke({"source": SOURCE, "response": BAD},
                                    context=HostContext(user="ada")))
    assert state["verdict"] == "hallucinated" and state["greeting"] == "hello ada"


def test_a_check_that_could_not_complete_is_unverified_never_supported() -> None:
    def unparseable(messages: list[Message]) -> Reply:
        if "fact checker" in messages[0]["content"]:
            return "Looks fine to me!"
        return scripted.responder()(messages)

    broken = Checker(Settings(_env_file=None),
                     backend=ScriptedBackend(responder=unparseable, judges_batches=True))
    state = host_app(check_node(broken)).invoke(
        {"source": SOURCE, "response": GOOD}, context=HostContext(user="ada"))
    assert state["verdict"] == "unverified"


def test_the_compiled_graph_added_directly_says_what_to_use_instead() -> None:
    with pytest.raises(ConfigError, match=r"HostContext context.*check_node"):
        host_app(checker().graph).invoke({"source": SOURCE, "response": GOOD},
                                         context=HostContext(user="ada"))


@pytest.mark.parametrize(("source", "response", "error"), [
    ("", GOOD, EmptyInputError),
    ("   \n", GOOD, EmptyInputError),
    (SOURCE, "", EmptyInputError),
    (SOURCE, "It opened\x00.", InputError),
    (None, GOOD, InputError),  # the host never set a source
])
def test_bad_input_is_refused_before_any_model_call_and_nothing_is_written(
        source: str | None, response: str, error: type[Exception]) -> None:
    conli = checker()
    app = host_app(check_node(conli), checkpointer=InMemorySaver())
    inputs = {"response": response} if source is None else {"source": source,
                                                            "response": response}
    config: Any = {"configurable": {"thread_id": "t"}}
    with pytest.raises(error):
        app.invoke(inputs, config, context=HostContext(user="ada"))
    assert conli.backend.calls == []  # type: ignore[attr-defined]
    assert "verdict" not in app.get_state(config).values


def test_the_node_honours_the_check_deadline() -> None:
    late = checker(check_deadline_seconds=1e-9)  # over before the first model call
    with pytest.raises(DeadlineExceededError):
        host_app(check_node(late)).invoke({"source": SOURCE, "response": BAD},
                                          context=HostContext(user="ada"))
    assert late.backend.calls == []  # type: ignore[attr-defined]


def test_per_node_settings_override_the_checkers() -> None:
    state = host_app(check_node(checker(), settings=Settings(
        _env_file=None, mitigate=False, judge=False))).invoke(
        {"source": SOURCE, "response": BAD}, context=HostContext(user="ada"))
    assert state["verdict"] == "hallucinated"
    assert state["mitigation"].status == "disabled" and state["refined_text"] == BAD


def test_conlis_steps_stream_as_a_subgraph_of_the_host() -> None:
    app = host_app(check_node(checker()))
    steps = [(bool(ns), step) for ns, update in app.stream(
        {"source": SOURCE, "response": BAD}, context=HostContext(user="ada"),
        subgraphs=True, stream_mode="updates") for step in update]
    assert [step for nested, step in steps if not nested] == ["greet", "conli"]
    inner = [step for nested, step in steps if nested]
    assert inner[:2] == ["split", "select"]
    assert {"merge", "coverage", "mitigate", "judge"} <= set(inner)


# --- the example: a chat graph with conli as its post-edit node ---------------------------

def load_example() -> ModuleType:
    return load_script(ROOT / "examples" / "langgraph_post_edit.py", "langgraph_post_edit")


def chat_and_check(example: ModuleType, draft: str, *, nli_broken: bool = False) -> Checker:
    """One scripted backend for the app's chat model and conli: drafts ``draft``."""

    def respond(messages: list[Message]) -> Reply:
        system = messages[0]["content"]
        if system == example.ANSWER_SYSTEM:
            assert "<question>Who runs the library?</question>" in messages[-1]["content"]
            return draft
        if nli_broken and "fact checker" in system:
            return json.dumps({"nothing": "useful"})
        return scripted.responder()(messages)

    return Checker(Settings(_env_file=None),
                   backend=ScriptedBackend(responder=respond, judges_batches=True))


@pytest.mark.parametrize(("draft", "nli_broken", "lines"), [
    (BAD, False, [
        f"[answer] {BAD}",
        "[conli] hallucinated; flagged: ['It is run by a FALSE charity.']",
        "[send_rewrite] The library opened in 1962. It is run by a true charity.",
    ]),
    (GOOD, False, [f"[answer] {GOOD}", "[conli] supported; flagged: []", f"[send] {GOOD}"]),
    (GOOD, True, [f"[answer] {GOOD}", "[conli] unverified; flagged: []",
                  "[decline] I could not give an answer that the source supports."]),
])
def test_the_post_edit_example_runs_end_to_end(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], draft: str, nli_broken: bool,
        lines: list[str]) -> None:
    example = load_example()
    source = tmp_path / "source.txt"
    source.write_text(SOURCE, encoding="utf-8")
    code = example.main(["--source", str(source), "--question", "Who runs the library?"],
                        checker=chat_and_check(example, draft, nli_broken=nli_broken))
    assert code == 0
    assert capsys.readouterr().out.splitlines() == lines


def test_the_post_edit_example_reports_bad_input_with_the_front_doors_exit_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example()
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    conli = chat_and_check(example, GOOD)
    code = example.main(["--source", str(empty), "--question", "Who runs the library?"],
                        checker=conli)
    assert code == 2 and "source is empty" in capsys.readouterr().err
    calls = conli.backend.calls  # type: ignore[attr-defined]
    assert [c[0]["content"] for c in calls] == [example.ANSWER_SYSTEM]  # the app's, not conli's


# --- a chat app's state: LangGraph's MessagesState (issue 45) -----------------------------

class ChatHostState(MessagesState, total=False):
    """A chat app's state: its messages plus the keys conli's node writes."""

    verdict: Verdict
    sentences: list[SentenceResult]
    refined_text: str
    mitigation: Mitigation


def chat_app(conli_node: Any, schema: Any = ChatHostState) -> Any:
    app = StateGraph(schema)
    app.add_node("conli", conli_node)
    app.add_edge(START, "conli")
    app.add_edge("conli", END)
    return app.compile()


def conversation(source: str, answer: str) -> list[Any]:
    """An earlier turn (its tool result is not this answer's source), then this turn."""
    return [
        HumanMessage("What is the weather?"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {}, "id": "w1"}]),
        ToolMessage("It is raining in FALSE town.", tool_call_id="w1"),
        AIMessage("It is raining."),
        HumanMessage("Who runs the library?"),
        AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": "s1"}]),
        ToolMessage(source, tool_call_id="s1"),
        AIMessage(answer),
    ]


def test_a_chat_states_last_answer_is_checked_against_this_turns_tool_results() -> None:
    conli = checker()
    state = chat_app(check_node(conli)).invoke({"messages": conversation(SOURCE, BAD)})
    assert state["verdict"] == "hallucinated"
    assert [s.verdict for s in state["sentences"]] == ["supported", "hallucinated"]
    assert state["refined_text"] == "The library opened in 1962. It is run by a true charity."
    prompts = "\n".join(m["content"] for call in conli.backend.calls  # type: ignore[attr-defined]
                        for m in call)
    assert "city council" in prompts and "raining" not in prompts  # only this turn's tool


def test_chat_messages_as_dicts_and_several_tool_results_are_read_too() -> None:
    class DictChat(TypedDict, total=False):
        messages: list[dict[str, Any]]  # no reducer: the dicts stay dicts
        verdict: Verdict
        sentences: list[SentenceResult]

    first, second = SOURCE.split(". ", 1)
    messages = [
        {"role": "user", "content": "Who runs the library?"},
        {"role": "tool", "content": first + ".", "tool_call_id": "a"},
        {"type": "tool", "content": [{"type": "text", "text": second}], "tool_call_id": "b"},
        {"role": "assistant", "content": [{"type": "text", "text": BAD}]},
    ]
    conli = checker()
    state = chat_app(check_node(conli), DictChat).invoke({"messages": messages})
    assert [s.verdict for s in state["sentences"]] == ["supported", "hallucinated"]
    prompts = "\n".join(m["content"] for call in conli.backend.calls  # type: ignore[attr-defined]
                        for m in call)
    assert f"{first}.\n\n{second}" in prompts  # one source, a blank line between results


def test_explicit_and_custom_keys_win_over_the_messages() -> None:
    class Custom(ChatHostState, total=False):
        answer: str
        context: str

    node = check_node(checker(), response_key="answer", source_key="context")
    state = chat_app(node, Custom).invoke(
        {"messages": conversation("The library is closed.", GOOD),  # ignored: keys win
         "answer": BAD, "context": SOURCE})
    assert [s.verdict for s in state["sentences"]] == ["supported", "hallucinated"]
    # without the custom keys in the state, the node falls back to the messages
    state = chat_app(node, Custom).invoke({"messages": conversation(SOURCE, BAD)})
    assert state["refined_text"] == "The library opened in 1962. It is run by a true charity."


def test_a_state_with_neither_keys_nor_messages_says_which_keys_it_has_and_reads() -> None:
    class Other(TypedDict, total=False):
        draft: str
        doc: str
        verdict: Verdict

    conli = checker()
    with pytest.raises(InputError) as raised:
        chat_app(check_node(conli), Other).invoke({"draft": BAD, "doc": SOURCE})
    message = str(raised.value)
    assert "no response and no source" in message
    assert "['doc', 'draft']" in message  # the state's keys
    assert "'response'" in message and "'source'" in message and "'messages'" in message
    assert conli.backend.calls == []  # type: ignore[attr-defined]
    with pytest.raises(InputError, match=r"no source .*'messages'.*'my_doc'"):  # custom keys
        chat_app(check_node(conli, source_key="my_doc")).invoke(
            {"messages": [HumanMessage("Who runs it?"), AIMessage(GOOD)]})


def test_reply_text_is_the_rewrite_or_none_when_every_sentence_was_removed() -> None:
    removing = Checker(Settings(_env_file=None), backend=ScriptedBackend(
        responder=rule_responder(bad=("FALSE",)), judges_batches=True))
    everything_wrong = "It is run by a FALSE charity."
    state = chat_app(check_node(removing)).invoke(
        {"messages": conversation(SOURCE, everything_wrong)})
    assert state["mitigation"].status == "rewritten" and state["refined_text"].strip() == ""
    assert reply_text(state) is None  # the app falls back instead of sending nothing
    fixed = chat_app(check_node(checker())).invoke({"messages": conversation(SOURCE, BAD)})
    assert reply_text(fixed) == "The library opened in 1962. It is run by a true charity."
    result = checker().check(SOURCE, BAD)
    assert reply_text(result) == result.refined_text.strip() != ""


def test_the_post_edit_example_declines_when_every_sentence_was_removed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example()
    wrong = "It is run by a FALSE charity."
    removes = rule_responder(bad=("FALSE",))

    def respond(messages: list[Message]) -> Reply:
        if messages[0]["content"] == example.ANSWER_SYSTEM:
            return wrong
        return removes(messages)

    source = tmp_path / "source.txt"
    source.write_text(SOURCE, encoding="utf-8")
    conli = Checker(Settings(_env_file=None),
                    backend=ScriptedBackend(responder=respond, judges_batches=True))
    assert example.main(["--source", str(source), "--question", "Who runs the library?"],
                        checker=conli) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"[decline] {example.DECLINED}"  # never an empty message


def test_the_chat_hook_examples_reply_falls_back_when_every_sentence_was_removed() -> None:
    example = load_script(ROOT / "examples" / "langgraph_chat_hook.py", "langgraph_chat_hook")
    assert example.reply({"refined_text": "  "}) == {"answer": example.DECLINED}
    assert example.reply({"refined_text": GOOD}) == {"answer": GOOD}


# --- a plain chat app (issue 54): the checked message carries the result ----------------

def plain_chat(node: Any) -> Any:
    """``StateGraph(MessagesState)``: no conli keys at all."""
    return chat_app(node, MessagesState)


def test_a_plain_messages_state_gets_the_checked_message_back_with_its_result() -> None:
    messages = conversation(SOURCE, BAD)
    state = plain_chat(check_node(checker())).invoke({"messages": messages})
    assert set(state) == {"messages"}
    assert len(state["messages"]) == len(messages)  # replaced in place, nothing appended
    sent = state["messages"][-1]
    assert isinstance(sent, AIMessage)
    assert sent.content == "The library opened in 1962. It is run by a true charity."
    conli = sent.response_metadata["conli"]
    json.dumps(conli)  # JSON-able as it is
    assert conli["verdict"] == "hallucinated" and conli["supported_share"] == 0.5
    assert [s["verdict"] for s in conli["sentences"]] == ["supported", "hallucinated"]
    assert conli["refined_text"] == sent.content
    assert [m.content for m in state["messages"][:-1]] == [m.content for m in messages[:-1]]


def test_the_checked_message_keeps_its_id_so_add_messages_replaces_it() -> None:
    draft = AIMessage(BAD, id="answer-1", response_metadata={"model_name": "m"})
    messages = [*conversation(SOURCE, BAD)[:-1], draft]
    state = plain_chat(check_node(checker())).invoke({"messages": messages})
    (sent,) = [m for m in state["messages"] if m.id == "answer-1"]
    assert sent is state["messages"][-1] and sent.response_metadata["model_name"] == "m"
    assert sent.response_metadata["conli"]["verdict"] == "hallucinated"


def test_a_supported_answer_goes_out_as_written_and_an_emptied_one_is_declined() -> None:
    good = plain_chat(check_node(checker())).invoke({"messages": conversation(SOURCE, GOOD)})
    assert good["messages"][-1].content == GOOD
    assert good["messages"][-1].response_metadata["conli"]["passed"] is True
    removing = Checker(Settings(_env_file=None), backend=ScriptedBackend(
        responder=rule_responder(bad=("FALSE",)), judges_batches=True))
    emptied = plain_chat(check_node(removing, declined="Sorry, I cannot say.")).invoke(
        {"messages": conversation(SOURCE, "It is run by a FALSE charity.")})
    last = emptied["messages"][-1]
    assert last.content == "Sorry, I cannot say."  # never an empty message
    assert last.response_metadata["conli"]["refined_text"].strip() == ""


def test_on_flag_raise_stops_an_answer_that_is_not_supported() -> None:
    from conli.errors import UnsupportedAnswerError, boundary

    node = check_node(checker(), on_flag="raise")
    with pytest.raises(UnsupportedAnswerError) as raised:
        plain_chat(node).invoke({"messages": conversation(SOURCE, BAD)})
    assert raised.value.verdict == "hallucinated"
    assert raised.value.result["sentences"][1]["verdict"] == "hallucinated"
    assert boundary(raised.value).exit_code == 4
    state = plain_chat(node).invoke({"messages": conversation(SOURCE, GOOD)})
    assert state["messages"][-1].content == GOOD  # supported: it goes on, annotated
    with pytest.raises(ConfigError, match="on_flag"):
        check_node(checker(), on_flag="ignore")  # type: ignore[arg-type]


def test_keyed_states_keep_their_keys_and_get_the_message_too() -> None:
    state = chat_app(check_node(checker())).invoke({"messages": conversation(SOURCE, BAD)})
    assert state["verdict"] == "hallucinated"  # the declared keys, as before
    assert state["messages"][-1].content == state["refined_text"]
    host = host_app(check_node(checker())).invoke(  # no messages: no messages update
        {"source": SOURCE, "response": BAD}, context=HostContext(user="ada"))
    assert "messages" not in host and host["verdict"] == "hallucinated"


def test_the_async_node_runs_under_ainvoke_and_a_timeout_stops_its_model_calls() -> None:
    state = asyncio.run(plain_chat(check_node(checker())).ainvoke(
        {"messages": conversation(SOURCE, BAD)}))
    assert state["messages"][-1].response_metadata["conli"]["verdict"] == "hallucinated"

    full = ScriptedBackend(responder=scripted.responder(), judges_batches=True)
    Checker(Settings(_env_file=None), backend=full).check(SOURCE, BAD)
    assert len(full.calls) >= 3  # a whole check: detection, rewrite, judge

    slow = ScriptedBackend(responder=scripted.responder(sleep=0.4), judges_batches=True)
    counted = Checker(Settings(_env_file=None), backend=slow)
    app = plain_chat(check_node(counted))

    async def give_up() -> int:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(app.ainvoke({"messages": conversation(SOURCE, BAD)}), 0.1)
        return len(slow.calls)  # the calls in flight when the graph was cancelled

    in_flight = asyncio.run(give_up())
    counted.close()  # waits for the abandoned check's thread to end
    assert in_flight <= 1 and len(slow.calls) == in_flight


def test_dict_messages_without_a_reducer_are_replaced_in_the_list() -> None:
    class DictChat(TypedDict, total=False):
        messages: list[dict[str, Any]]

    messages = [{"role": "user", "content": "Who runs the library?"},
                {"role": "tool", "content": SOURCE, "tool_call_id": "a"},
                {"role": "assistant", "content": BAD}]
    state = chat_app(check_node(checker()), DictChat).invoke({"messages": messages})
    assert [m["role"] for m in state["messages"]] == ["user", "tool", "assistant"]
    last = state["messages"][-1]
    assert last["content"] == "The library opened in 1962. It is run by a true charity."
    assert last["response_metadata"]["conli"]["verdict"] == "hallucinated"


def test_the_old_path_of_the_node_still_works_and_says_where_it_moved() -> None:
    import conli.graph
    import conli.hook

    with pytest.warns(DeprecationWarning, match=r"conli\.check_node \(conli\.hook\.check_node\)"):
        old = conli.graph.check_node
    assert old is check_node is conli.hook.check_node

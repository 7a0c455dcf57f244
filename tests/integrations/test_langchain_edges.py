"""The LangChain integration at its edges, on the embedded store and real Redis: two agents
in one run (their streamed replies are two bubbles of the chat, not one), names used
twice, an empty transcript, a model's tool call without an id, and a user-supplied graph
whose tool calls a model of its own."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import create_react_agent

from runtime import RunFailed, RunStatus, Runtime, UsageError, Worker, step, workflow
from runtime.integrations.langchain import (
    HumanTool,
    create_agent_graph,
    decode_transcript,
    encode_transcript,
    final_text,
    run_agent,
)
from tests.integrations import test_langchain


class TurnModel(test_langchain.TurnModel):
    """Replies ``replies[n]`` to a transcript holding n AI messages (streamed word by word),
    not counted in the demo's trace."""

    counted: bool = False


@dataclass
class Bubble:
    """The widget's AgentBubble (widget/messages.js): chunk ``seq`` of its message; a
    chunk 0 after later ones is the message streamed again (a re-execution), which
    replaces its text; a chunk seen before is dropped."""

    text: str = ""
    seq: int = 0

    def apply(self, seq: int, delta: str) -> None:
        if seq < self.seq:
            if seq != 0:
                return
            self.text = ""
        self.seq = seq + 1
        self.text += delta


async def chat(rt: Runtime, session: str) -> list[str]:
    """The agent's bubbles, as the widget shows the session's text frames: one bubble per
    ``message_id`` (widget/frames.js ``onText``), in order of their first frame."""
    bubbles: dict[str, Bubble] = {}
    for _, frame in await rt.read_outbox(session, count=10_000):
        if frame["type"] == "text":
            bubbles.setdefault(frame["message_id"], Bubble()).apply(frame["seq"], frame["delta"])
    return [b.text for b in bubbles.values()]


async def text_frames(rt: Runtime, session: str) -> list[dict[str, Any]]:
    return [f for _, f in await rt.read_outbox(session, count=10_000) if f["type"] == "text"]


# 1. Two agents in one run -------------------------------------------------------------
AGENTS = {
    "first": create_agent_graph(TurnModel(replies=[AIMessage("The first agent's reply.")]), [], []),
    "second": create_agent_graph(TurnModel(replies=[AIMessage("The second one's.")]), [], []),
}


@step(name="lc_edges_agent")
async def agent_step(which: str) -> str:
    return final_text(await run_agent(AGENTS[which], [HumanMessage("hi")], []))


@workflow(name="lc_edges_two_agents")
async def two_agents() -> list[str]:
    return [await agent_step("first"), await agent_step("second")]


async def test_two_agent_steps_of_one_run_stream_into_two_bubbles(rt: Runtime) -> None:
    """Each agent's first reply was streamed as ``<run>:0``: the widget keys its bubbles
    by message_id, so the second agent's reply replaced the first one's bubble."""
    session = Runtime.new_session_id()
    run_id = await rt.start(two_agents, session=session)
    await Worker(rt, timer_tick=0.01).drain()
    assert await rt.wait(run_id, timeout=5) == ["The first agent's reply.", "The second one's."]
    assert await chat(rt, session) == ["The first agent's reply.", "The second one's."]


FLAKY_RUNS: list[int] = []


@step(name="lc_edges_flaky", retries=1, retry_delay=0)
async def flaky_step() -> str:
    """Streams the agent's reply, then fails once: the retry streams it again."""
    reply = final_text(await run_agent(AGENTS["first"], [HumanMessage("hi")], []))
    FLAKY_RUNS.append(len(FLAKY_RUNS))
    if len(FLAKY_RUNS) == 1:
        raise RuntimeError("failed after the reply")
    return reply


@workflow(name="lc_edges_flaky_wf")
async def flaky_wf() -> str:
    return await flaky_step()


async def test_a_re_executed_agent_step_streams_under_the_same_ids(rt: Runtime) -> None:
    """Durable ids: the retry streams the reply again under the ids it had, so the widget
    replaces the bubble's text instead of showing the reply twice."""
    FLAKY_RUNS.clear()
    session = Runtime.new_session_id()
    run_id = await rt.start(flaky_wf, session=session)
    await Worker(rt, timer_tick=0.01).drain()
    assert await rt.wait(run_id, timeout=5) == "The first agent's reply."
    assert FLAKY_RUNS == [0, 1]
    frames = await text_frames(rt, session)
    ids = [(f["message_id"], f["seq"]) for f in frames]
    assert ids[: len(ids) // 2] == ids[len(ids) // 2 :]  # the same ids, twice
    assert await chat(rt, session) == ["The first agent's reply."]


ASKING_AGENT = create_agent_graph(
    TurnModel(
        replies=[
            AIMessage("", tool_calls=[{"name": "ask", "args": {"question": "Why?"}, "id": "c1"}]),
            AIMessage("Because."),
        ]
    ),
    [],
    [test_langchain.ASK],
)


@step(name="lc_edges_two_in_one")
async def two_in_one_step() -> list[str]:
    first = final_text(await run_agent(AGENTS["first"], [HumanMessage("hi")], []))
    ask = test_langchain.ASK
    return [first, final_text(await run_agent(ASKING_AGENT, [HumanMessage("hi")], [ask]))]


@workflow(name="lc_edges_two_in_one_wf")
async def two_in_one_wf() -> list[str]:
    return await two_in_one_step()


async def test_a_second_run_agent_in_one_step_is_refused(rt: Runtime) -> None:
    """The agent's checkpoint is the step's one checkpoint: the second agent suspended on
    its question, and on resume the first run_agent() found that checkpoint and resumed
    the second agent's conversation with the first agent's graph. One agent per step."""
    session = Runtime.new_session_id()
    run_id = await rt.start(two_in_one_wf, session=session)
    await Worker(rt, timer_tick=0.01).drain()
    run = await rt.get_run(run_id)
    assert run.status is RunStatus.FAILED, (run.status, run.error)
    said = str(run.error)
    assert "UsageError" in said and "called twice in step 'lc_edges_two_in_one-0'" in said


# 2. Names used twice, an empty transcript, a tool call without an id -------------------
ASK = test_langchain.ASK
ASK_AGAIN = HumanTool("ask", "Ask the person again.", {"type": "object"})


@tool
async def ship(order: str) -> str:
    """Ship an order."""
    return f"shipped {order}"


@pytest.mark.parametrize(
    ("tools", "human"),
    [([], [ASK, ASK_AGAIN]), ([ship, ship], [ASK])],
    ids=["human-tools", "tools"],
)
def test_a_tool_name_used_twice_is_refused_when_the_graph_is_made(
    tools: list[BaseTool], human: list[HumanTool]
) -> None:
    """The graph looked the human tools up by name: the second ``ask`` silently hid the
    first one while the model was bound to both."""
    model = TurnModel(replies=[AIMessage("hi")])
    with pytest.raises(UsageError, match="used twice") as refused:
        create_agent_graph(model, tools, human)
    assert ("'ask'" if len(human) == 2 else "'ship'") in str(refused.value)


@step(name="lc_edges_twice_step")
async def twice_step() -> str:
    graph = AGENTS["first"]
    return final_text(await run_agent(graph, [HumanMessage("hi")], [ASK, ASK_AGAIN]))


@workflow(name="lc_edges_twice")
async def twice_wf() -> str:
    return await twice_step()


async def failure(rt: Runtime, wf: Any) -> tuple[str, str]:
    """How a run of ``wf`` failed, and the run."""
    run_id = await rt.start(wf)
    await Worker(rt, timer_tick=0.01).drain()
    with pytest.raises(RunFailed) as failed:
        await rt.wait(run_id, timeout=5)
    return str(failed.value), run_id


async def test_run_agent_refuses_two_human_tools_of_one_name(rt: Runtime) -> None:
    said, _ = await failure(rt, twice_wf)
    assert "UsageError" in said and "used twice" in said and "'ask'" in said


async def test_the_agent_graph_entered_with_no_message_says_so() -> None:
    """The router read ``messages[-1]`` of an empty transcript: an IndexError."""
    graph = create_agent_graph(TurnModel(replies=[AIMessage("hi")]), [], [ASK])
    with pytest.raises(UsageError, match="no messages"):
        await graph.ainvoke({"messages": []})


@step(name="lc_edges_empty_step")
async def empty_step() -> str:
    return final_text(await run_agent(AGENTS["first"], [], [ASK]))


@workflow(name="lc_edges_empty")
async def empty_wf() -> str:
    return await empty_step()


async def test_run_agent_on_an_empty_transcript_fails_the_run_saying_so(rt: Runtime) -> None:
    said, run_id = await failure(rt, empty_wf)
    assert "UsageError" in said and "no messages" in said and run_id in said


def asking(question: str) -> AIMessage:
    """A human call without an id (some models' and servers' tool calls have none)."""
    call = {"name": "ask", "args": {"question": question}, "id": None, "type": "tool_call"}
    return AIMessage("", tool_calls=[call])  # type: ignore[list-item]


def shipping(order: str) -> AIMessage:
    call = {"name": "ship", "args": {"order": order}, "id": None, "type": "tool_call"}
    return AIMessage("", tool_calls=[call])  # type: ignore[list-item]


ID_LESS = {
    "ours": create_agent_graph(
        TurnModel(replies=[shipping("A-1"), asking("Gift wrap?"), AIMessage("wrapped")]),
        [ship],
        [ASK],
    ),
}
with warnings.catch_warnings():  # moved to langchain.agents, not in the langchain extra
    warnings.simplefilter("ignore")
    ID_LESS["foreign"] = create_react_agent(
        TurnModel(replies=[asking("Gift wrap?"), AIMessage("wrapped")]), [ASK.tool]
    )


@step(name="lc_edges_id_less_step")
async def id_less_step(which: str) -> list[dict[str, Any]]:
    transcript = await run_agent(ID_LESS[which], [HumanMessage("hi")], [ASK], stream=False)
    return encode_transcript(transcript)


@workflow(name="lc_edges_id_less")
async def id_less_wf(which: str) -> list[dict[str, Any]]:
    return await id_less_step(which)


@pytest.mark.parametrize("which", ["ours", "foreign"])
async def test_a_tool_call_without_an_id_is_given_one_and_answered(rt: Runtime, which: str) -> None:
    """A call's result is matched to it by id: a call without one got a ToolMessage that
    could not be made (a pydantic error from deep inside) or none at all."""
    worker = Worker(rt, timer_tick=0.01)
    run_id = await rt.start(id_less_wf, which)
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    assert pending.prompt == "Gift wrap?"
    assert await rt.resume_hook(pending.token, "yes")
    await worker.drain()
    transcript = decode_transcript(await rt.wait(run_id, timeout=5))
    assert final_text(transcript) == "wrapped"
    results = {m.tool_call_id: m.text for m in transcript if isinstance(m, ToolMessage)}
    called = [c for m in transcript if isinstance(m, AIMessage) for c in m.tool_calls]
    assert all(c["id"] for c in called)
    assert {c["id"] for c in called} == set(results)  # each call answered under its id
    assert "yes" in results.values()


# 3. A user-supplied graph whose tool calls a model of its own ---------------------------
# (test_langchain.summarize: a tool that calls a model of its own)
SUMMARIZE_CALL = {"name": "summarize", "args": {"text": "t"}, "id": "c1", "type": "tool_call"}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    SUMMARIZING = create_react_agent(
        TurnModel(
            replies=[
                AIMessage("Let me summarize. ", tool_calls=[SUMMARIZE_CALL]),  # type: ignore[list-item]
                AIMessage("Here it is."),
            ]
        ),
        [test_langchain.summarize, ASK.tool],
    )


@step(name="lc_edges_summarizing_step")
async def summarizing_step() -> str:
    return final_text(await run_agent(SUMMARIZING, [HumanMessage("hi")], [ASK]))


@workflow(name="lc_edges_summarizing")
async def summarizing_wf() -> str:
    return await summarizing_step()


async def test_a_user_graphs_tool_model_is_not_streamed_as_the_agents_text(rt: Runtime) -> None:
    """The package's own graph runs its tools untagged for the message stream; another
    graph's tool node (here create_react_agent's) does not: the tool's own model text was
    streamed as the agent's, under the turn of its next reply, into that reply's bubble."""
    session = Runtime.new_session_id()
    run_id = await rt.start(summarizing_wf, session=session)
    await Worker(rt, timer_tick=0.01).drain()
    assert await rt.wait(run_id, timeout=5) == "Here it is."
    assert await chat(rt, session) == ["Let me summarize. ", "Here it is."]

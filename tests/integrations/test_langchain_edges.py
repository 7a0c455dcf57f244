"""The LangChain integration at its edges, on the embedded store and real Redis: two agents
in one run (their streamed replies are two bubbles of the chat, not one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from examples.langchain_agent import ScriptedChatModel
from runtime import Runtime, Worker, step, workflow
from runtime.integrations.langchain import create_agent_graph, final_text, run_agent


class TurnModel(ScriptedChatModel):
    """Replies ``replies[n]`` to a transcript holding n AI messages, whatever happened in
    between (the same reply on every re-execution); streams its text word by word."""

    replies: list[AIMessage]
    counted: bool = False

    async def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        return self.replies[sum(isinstance(m, AIMessage) for m in messages)].model_copy()


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

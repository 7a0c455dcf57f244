"""The LangChain integration in-process, real Redis: the agent of examples/langchain_agent.py
asks the visitor through a durable human tool (acceptance 1, 3, 4, 5)."""

from __future__ import annotations

import asyncio
import os
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
)
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import create_react_agent
from pydantic import BaseModel

from examples import langchain_agent as demo
from examples import trace
from runtime import (
    InvalidPayload,
    ParleyError,
    RunFailed,
    RunStatus,
    Runtime,
    StoreUnavailable,
    Worker,
    step,
    workflow,
)
from runtime.integrations.langchain import (
    HumanTool,
    create_agent_graph,
    decode_transcript,
    encode_transcript,
    final_text,
    run_agent,
)
from tests.helpers import running
from tests.raw_redis import raw

pytestmark = pytest.mark.redis


@pytest.fixture
async def lrt(redis_url: str) -> AsyncIterator[Runtime]:
    async with Runtime(redis_url, partitions=4) as runtime:
        yield runtime


@pytest.fixture(autouse=True)
def _trace(demo_trace: Path) -> Path:
    return demo_trace


async def counts(rt: Runtime, run_id: str) -> dict[str, int]:
    return trace.counts(os.environ[trace.ENV], run_id)


def work(turns: int, prompts: int = 1) -> dict[str, int]:
    """The counters of a run without a crash: each model turn once, the side effect once."""
    return {**{f"turn:{n}": 1 for n in range(turns)}, "lookup_order": 1, "on_created": prompts}


async def outbox(rt: Runtime, session: str) -> list[dict[str, Any]]:
    return [m for _, m in await rt.read_outbox(session, count=1000)]


async def until_suspended(rt: Runtime, worker: Worker, run_id: str, hooks: int) -> None:
    deadline = time.monotonic() + 15
    while True:
        run = await rt.get_run(run_id)
        created = len(await rt.list_hooks(None, run_id=run_id))
        if run.status is RunStatus.SUSPENDED and created == hooks and worker.running == 0:
            return
        assert time.monotonic() < deadline, f"run {run_id} did not suspend on hook {hooks}"
        await asyncio.sleep(0.01)


async def tasks_back_to(idle: int) -> None:
    """The loop's tasks are back to ``idle`` at most. The worker's own sends (a deadline
    pass the hook's deadline woke, a heartbeat) may be in flight for a moment on a loaded
    machine; a task of the agent would stay."""
    deadline = time.monotonic() + 5
    while len(tasks := asyncio.all_tasks()) > idle:
        names = sorted(t.get_coro().__qualname__ for t in tasks)  # type: ignore[union-attr]
        assert time.monotonic() < deadline, f"{len(tasks)} tasks, idle {idle}: {names}"
        await asyncio.sleep(0.01)


def transcript_of(result: dict[str, Any]) -> list[BaseMessage]:
    return messages_from_dict(result["transcript"])


async def test_human_tool_suspends_without_a_task_and_resumes(lrt: Runtime) -> None:
    session = Runtime.new_session_id()
    worker = Worker(lrt, timer_tick=0.01)
    async with running(worker):
        await worker.ready.wait()
        idle_tasks = len(asyncio.all_tasks())
        run_id = await lrt.start("langchain_agent", "Where is order B-7?", session=session)
        await until_suspended(lrt, worker, run_id, hooks=1)
        await tasks_back_to(idle_tasks)  # nothing of the agent is left running
        [pending] = await lrt.list_hooks(run_id=run_id)
        assert pending.name == "ask_visitor"
        assert await counts(lrt, run_id) == work(2)
        assert await lrt.resume_hook(pending.token, "refund")
        result = await lrt.wait(run_id, timeout=15)

    assert result["reply"] == "Done: refund for order B-7. Anything else?"
    # One model call per turn over the whole run; the side-effecting tool ran once.
    assert await counts(lrt, run_id) == work(3)
    transcript = transcript_of(result)
    answer = transcript[-2]
    assert isinstance(answer, ToolMessage)
    assert (answer.content, answer.tool_call_id) == ("refund", "call_1_ask_visitor")
    types = [e.type for e in await lrt.events(run_id)]
    assert types.count("hook.created") == 1 and types.count("step.suspended") == 1
    assert await raw(lrt).client.exists(raw(lrt).run_keys(run_id).ckpt) == 0  # deleted at the end

    # Streamed text: each turn shown once, in order, none repeated after the resume.
    frames = await outbox(lrt, session)
    texts = [m for m in frames if m["type"] == "text"]
    ids = [(m["message_id"], m["seq"]) for m in texts]
    assert len(ids) == len(set(ids))
    shown = {}
    for m in texts:
        shown[m["message_id"]] = shown.get(m["message_id"], "") + m["delta"]
    assert shown == {
        f"{run_id}:lc_agent-0:0": "Let me look that order up. ",
        f"{run_id}:lc_agent-0:1": "Your parcel was lost in transit. I can refund or reship it.",
        f"{run_id}:lc_agent-0:2": "Done: refund for order B-7. Anything else?",
    }
    assert [m["type"] for m in frames].count("prompt") == 1
    prompt = next(m for m in frames if m["type"] == "prompt")
    assert prompt["prompt"] == "Refund or reship?"
    assert prompt["schema"]["enum"] == ["refund", "reship"]


async def test_invalid_answer_is_rejected_by_the_answer_schema(lrt: Runtime) -> None:
    worker = Worker(lrt, timer_tick=0.01)
    run_id = await lrt.start("langchain_agent", "Where is order B-7?")
    await worker.drain()
    [pending] = await lrt.list_hooks(run_id=run_id)
    with pytest.raises(InvalidPayload, match="does not match the hook's schema"):
        await lrt.resume_hook(pending.token, "burn it")
    assert (await lrt.get_run(run_id)).status is RunStatus.SUSPENDED


async def test_two_human_tool_calls_in_one_agent_run(lrt: Runtime) -> None:
    worker = Worker(lrt, timer_tick=0.01)
    run_id = await lrt.start("langchain_agent", "Order C-3 never came, new address")
    await worker.drain()
    [first] = await lrt.list_hooks(run_id=run_id)
    assert await lrt.resume_hook(first.token, "reship")
    await worker.drain()
    [second] = await lrt.list_hooks(run_id=run_id)
    assert second.token != first.token
    assert second.prompt == "Which address should we ship to?"
    assert await lrt.resume_hook(second.token, "1 Main St")
    await worker.drain()
    result = await lrt.wait(run_id, timeout=5)

    assert result["reply"] == "Done: reship / 1 Main St for order C-3. Anything else?"
    assert await counts(lrt, run_id) == work(4, prompts=2)
    events = await lrt.events(run_id)
    waits = [e.data["wait"] for e in events if e.type == "step.suspended"]
    assert waits == ["lc_agent-0.ask_visitor.0", "lc_agent-0.ask_visitor.1"]  # one per round
    answers = [m for m in transcript_of(result) if isinstance(m, ToolMessage)]
    assert [(m.name, m.content, m.tool_call_id) for m in answers] == [
        (
            "lookup_order",
            "order C-3: shipped 12 days ago, parcel lost in transit",
            "call_0_lookup_order",
        ),
        ("ask_visitor", "reship", "call_1_ask_visitor"),
        ("ask_visitor", "1 Main St", "call_2_ask_visitor"),
    ]


async def test_timeout_gives_the_agent_a_no_response_result(lrt: Runtime) -> None:
    session = Runtime.new_session_id()
    worker = Worker(lrt, timer_tick=0.01)
    async with running(worker):
        run_id = await lrt.start(
            "langchain_agent", "Where is order D-9?", prompt_timeout=0.3, session=session
        )
        result = await lrt.wait(run_id, timeout=15)

    assert result["reply"] == "I did not hear back; I left the order as it is. Write any time!"
    answer = transcript_of(result)[-2]
    assert isinstance(answer, ToolMessage)
    assert (answer.content, answer.tool_call_id) == (demo.NO_RESPONSE, "call_1_ask_visitor")
    [hook] = await lrt.list_hooks(None, run_id=run_id)
    assert hook.status.value == "expired"
    assert await counts(lrt, run_id) == work(3)


async def test_checkpointed_transcript_round_trips_exactly(lrt: Runtime) -> None:
    worker = Worker(lrt, timer_tick=0.01)
    run_id = await lrt.start("langchain_agent", "Where is order E-1?")
    await worker.drain()
    saved = await raw(lrt).client.hgetall(raw(lrt).run_keys(run_id).ckpt)
    assert list(saved) == [b"lc_agent-0"]
    checkpoint = orjson.loads(saved[b"lc_agent-0"])
    assert checkpoint["pending"] == {
        "tool": "ask_visitor",
        "args": {"question": "Refund or reship?", "choices": ["refund", "reship"]},
        "tool_call_id": "call_1_ask_visitor",
    }
    restored = decode_transcript(checkpoint["messages"])
    [pending] = await lrt.list_hooks(run_id=run_id)
    await lrt.resume_hook(pending.token, "refund")
    await worker.drain()
    final = transcript_of(await lrt.wait(run_id, timeout=5))

    # What the step resumed from is exactly what the agent had produced: same messages,
    # ids, tool calls (with their ids) and multi-part content.
    assert restored == final[: len(restored)]
    asked = restored[-1]
    assert isinstance(asked, AIMessage)
    assert asked.content == [
        {"type": "text", "text": "Your parcel was lost in transit. "},
        {"type": "text", "text": "I can refund or reship it."},
    ]
    assert [(c["id"], c["name"]) for c in asked.tool_calls] == [
        ("call_1_ask_visitor", "ask_visitor")
    ]
    assert all(m.id for m in restored)


def test_encode_decode_preserves_every_message_field() -> None:
    transcript: list[BaseMessage] = [
        SystemMessage("be brief", id="s1"),
        HumanMessage(
            content=[
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
            id="h1",
        ),
        AIMessage(
            content=[{"type": "text", "text": "checking"}, {"type": "text", "text": " twice"}],
            tool_calls=[
                {
                    "name": "lookup",
                    "args": {"q": "x", "n": [1, 2]},
                    "id": "call_a",
                    "type": "tool_call",
                },
                {
                    "name": "ask_visitor",
                    "args": {"question": "ok?"},
                    "id": "call_b",
                    "type": "tool_call",
                },
            ],
            additional_kwargs={"reasoning": "r"},
            response_metadata={"model": "scripted"},
            id="a1",
        ),
        ToolMessage("found", tool_call_id="call_a", name="lookup", status="error", id="t1"),
    ]
    # Through JSON bytes, as the checkpoint goes through Redis.
    restored = decode_transcript(orjson.loads(orjson.dumps(encode_transcript(transcript))))
    assert restored == transcript
    assert [type(m) for m in restored] == [type(m) for m in transcript]
    ai = restored[2]
    assert isinstance(ai, AIMessage)
    assert [c["id"] for c in ai.tool_calls] == ["call_a", "call_b"]
    assert ai.content == transcript[2].content


# Agents built here from a model that replies by turn -------------------------------------
class TurnModel(demo.ScriptedChatModel):
    """Replies ``replies[n]`` to a transcript holding n AI messages: the same reply on
    every re-execution, whatever happened in between."""

    replies: list[AIMessage]

    async def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        return self.replies[sum(isinstance(m, AIMessage) for m in messages)].model_copy()


class AskArgs(BaseModel):
    question: str


ASK = HumanTool("ask", "Ask the person.", AskArgs)
DONE: list[str] = []  # what the side-effecting tool did, in order


@tool
async def ship(order: str) -> str:
    """Ship an order (a side effect)."""
    DONE.append(order)
    return f"shipped {order}"


def calls(*calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in calls])


AGENTS: dict[str, tuple[Any, HumanTool]] = {}  # by workflow name: the step's agent
WORKFLOWS: set[str] = set()


def agent_workflow(
    name: str, replies: list[AIMessage], tools: list[BaseTool], human: HumanTool = ASK
) -> str:
    """A workflow whose one step runs an agent on ``replies`` (registered once per name;
    calling it again swaps the agent, as a deploy would)."""
    AGENTS[name] = (create_agent_graph(TurnModel(replies=replies), tools, [human]), human)
    if name in WORKFLOWS:
        return name

    @step(name=f"{name}_step")
    async def agent_step() -> list[dict[str, Any]]:
        graph, asks = AGENTS[name]
        transcript = await run_agent(graph, [HumanMessage("hi")], [asks], stream=False)
        return encode_transcript(transcript)

    @workflow(name=name)
    async def agent_wf() -> list[dict[str, Any]]:
        return await agent_step()

    WORKFLOWS.add(name)
    return name


async def test_a_tool_call_id_reused_by_a_later_turn_still_asks_the_person(lrt: Runtime) -> None:
    """Call ids are unique within one AI message only: some OpenAI-compatible servers
    number each reply's calls from ``call_0`` again. The human call of turn 1 is not taken
    for answered by the ToolMessage of turn 0's call with the same id."""
    DONE.clear()
    name = agent_workflow(
        "lc_reused_ids",
        [
            calls(("ship", {"order": "A-1"}, "call_0")),
            calls(("ask", {"question": "Gift wrap?"}, "call_0")),
            AIMessage("wrapped and shipped"),
        ],
        [ship],
    )
    worker = Worker(lrt, timer_tick=0.01)
    run_id = await lrt.start(name)
    await worker.drain()
    [pending] = await lrt.list_hooks(run_id=run_id)
    assert pending.prompt == "Gift wrap?"
    assert await lrt.resume_hook(pending.token, "yes")
    await worker.drain()
    transcript = decode_transcript(await lrt.wait(run_id, timeout=5))
    assert [(type(m).__name__, m.text) for m in transcript[-3:]] == [
        ("AIMessage", ""),
        ("ToolMessage", "yes"),
        ("AIMessage", "wrapped and shipped"),
    ]
    assert DONE == ["A-1"]


notify_calls: list[str] = []  # notify's calls, and how the first one failed ("direct", "wrapped")


@tool
async def notify(order: str) -> str:
    """Tell the warehouse (through a Runtime call, which an outage fails)."""
    notify_calls.append(order)
    if len(notify_calls) == 1:
        try:
            raise StoreUnavailable("Redis is unreachable")
        except StoreUnavailable as exc:
            if order == "direct":
                raise
            raise RuntimeError("could not notify the warehouse") from exc
    return f"notified about {order}"


@pytest.mark.parametrize("how", ["direct", "wrapped"])
async def test_a_redis_outage_in_a_tool_is_the_steps_outage_not_a_result_for_the_model(
    redis_url: str, how: str
) -> None:
    """README: a Runtime call's StoreUnavailable that a step lets out (or raises its own
    error from) abandons the execution, which runs again after the outage. The tool node
    must not turn it into a tool error that the model reads and answers on."""
    notify_calls.clear()
    name = agent_workflow(
        f"lc_outage_{how}",
        [calls(("notify", {"order": how}, "c1")), AIMessage("the warehouse knows")],
        [notify],
    )
    async with (
        Runtime(redis_url, partitions=4, lease_seconds=1) as rt,
        running(Worker(rt, timer_tick=0.01)),
    ):
        run_id = await rt.start(name)
        transcript = decode_transcript(await rt.wait(run_id, timeout=15))
    assert notify_calls == [how, how]  # abandoned, then executed again
    [result] = [m for m in transcript if isinstance(m, ToolMessage)]
    assert (result.content, result.status) == (f"notified about {how}", "success")
    assert final_text(transcript) == "the warehouse knows"


ASK_JSON_SCHEMA = HumanTool(
    "ask",
    "Ask the person.",
    {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
)


@pytest.mark.parametrize("human", [ASK, ASK_JSON_SCHEMA], ids=["pydantic", "json-schema"])
async def test_a_human_call_whose_arguments_do_not_fit_goes_back_to_the_model(
    lrt: Runtime, human: HumanTool
) -> None:
    """The model is bound to the human tool's args_schema but no graph node runs the tool:
    arguments that do not fit it are answered with the error, as an ordinary tool's are,
    and the person is asked only on the model's corrected call."""
    name = agent_workflow(
        "lc_bad_args_" + ("json" if isinstance(human.args_schema, dict) else "pydantic"),
        [
            calls(("ask", {"text": "Gift wrap?"}, "c1")),
            calls(("ask", {"question": "Gift wrap?"}, "c2")),
            AIMessage("wrapped"),
        ],
        [],
        human,
    )
    worker = Worker(lrt, timer_tick=0.01)
    run_id = await lrt.start(name)
    await worker.drain()
    [pending] = await lrt.list_hooks(None, run_id=run_id)
    assert pending.prompt == "Gift wrap?"
    assert await lrt.resume_hook(pending.token, "yes")
    await worker.drain()
    transcript = decode_transcript(await lrt.wait(run_id, timeout=5))
    refused, answered = [m for m in transcript if isinstance(m, ToolMessage)]
    assert (refused.tool_call_id, refused.status) == ("c1", "error")
    assert "invalid arguments" in refused.text and "question" in refused.text
    assert (answered.tool_call_id, answered.text) == ("c2", "yes")
    assert final_text(transcript) == "wrapped"


async def test_a_human_tool_removed_while_a_run_waits_on_it_blocks_the_run(lrt: Runtime) -> None:
    """README: a step_hook renamed or removed while its step waited on it blocks the run
    (not failed, nothing lost); `rt.retry` resumes it once matching code runs. A human
    tool is its step_hook: the answer must not be lost to a KeyError."""
    replies = [calls(("ask", {"question": "Gift wrap?"}, "c1")), AIMessage("wrapped")]
    name = agent_workflow("lc_removed_tool", replies, [])
    worker = Worker(lrt, timer_tick=0.01)
    run_id = await lrt.start(name)
    await worker.drain()
    [pending] = await lrt.list_hooks(run_id=run_id)
    renamed = HumanTool("ask_person", "Ask the person.", AskArgs)
    agent_workflow(name, replies, [], renamed)  # deployed while the run waits
    assert await lrt.resume_hook(pending.token, "yes")
    await worker.drain()
    run = await lrt.get_run(run_id)
    assert run.status is RunStatus.BLOCKED, run.error
    assert "'ask'" in str(run.error)
    agent_workflow(name, replies, [])  # rolled back
    await lrt.retry(run_id)
    await worker.drain()
    transcript = decode_transcript(await lrt.wait(run_id, timeout=5))
    assert [m.text for m in transcript if isinstance(m, ToolMessage)] == ["yes"]
    assert final_text(transcript) == "wrapped"


with warnings.catch_warnings():  # moved to langchain.agents, not in the langchain extra
    warnings.simplefilter("ignore")
    FOREIGN = create_react_agent(
        TurnModel(
            replies=[calls(("ship", {"order": "A"}, "c1"), ("ask", {"question": "?"}, "c2"))]
        ),
        [ship, ASK.tool],
    )


@step(name="lc_foreign_step")
async def foreign_step() -> dict[str, Any]:
    try:
        await run_agent(FOREIGN, [HumanMessage("hi")], [ASK], stream=False)
    except ParleyError as exc:  # what a caller that handles Parley's errors sees
        return {"type": type(exc).__name__, "run_id": exc.run_id}
    return {}


@workflow(name="lc_foreign")
async def foreign_wf() -> dict[str, Any]:
    return await foreign_step()


async def test_a_graph_that_runs_a_human_tool_raises_a_parley_error_naming_the_run(
    lrt: Runtime,
) -> None:
    """A foreign graph's tool node ran the human tool (a human call mixed with an ordinary
    one): the error is a ParleyError, as every error Parley raises, and carries the run."""
    worker = Worker(lrt, timer_tick=0.01)
    run_id = await lrt.start(foreign_wf)
    await worker.drain()
    assert await lrt.wait(run_id, timeout=5) == {"type": "HumanToolNotDriven", "run_id": run_id}


class Reading:
    """What a tool may hand back as its artifact: a Python object, not JSON."""


@tool(response_format="content_and_artifact")
async def stock(order: str) -> tuple[str, Any]:
    """Check the stock (its artifact: the raw reading)."""
    return "3 left", {"reading": Reading()}


async def test_a_tool_result_that_is_not_json_fails_the_run_naming_the_tool(
    lrt: Runtime,
) -> None:
    """The transcript is checkpointed as JSON: a tool's artifact that is not JSON cannot
    be, and the error says which message of the transcript is at fault (the tool, its
    call) with the run, not only that the step checkpoint was not JSON."""
    name = agent_workflow(
        "lc_not_json",
        [calls(("stock", {"order": "A-1"}, "c1")), AIMessage("3 left")],
        [stock],
    )
    worker = Worker(lrt, timer_tick=0.01)
    run_id = await lrt.start(name)
    await worker.drain()
    with pytest.raises(RunFailed) as failed:
        await lrt.wait(run_id, timeout=5)
    said = str(failed.value)
    assert "InvalidPayload" in said and run_id in said
    assert "tool 'stock'" in said and "call 'c1'" in said and "Reading" in said


INNER = TurnModel(replies=[AIMessage("words only the tool reads")], counted=False)


@tool
async def summarize(text: str) -> str:
    """Summarize a text (with a model of its own)."""
    return (await INNER.ainvoke([HumanMessage(text)])).text


SUMMARIZING = create_agent_graph(
    TurnModel(
        replies=[
            AIMessage(
                "Let me summarize. ",
                tool_calls=[{"name": "summarize", "args": {"text": "t"}, "id": "c1"}],
            ),
            AIMessage("Here it is."),
        ],
        counted=False,
    ),
    [summarize],
    [ASK],
)


@step(name="lc_summarizing_step")
async def summarizing_step() -> str:
    return final_text(await run_agent(SUMMARIZING, [HumanMessage("hi")], [ASK]))


@workflow(name="lc_summarizing")
async def summarizing_wf() -> str:
    return await summarizing_step()


async def test_a_tools_own_model_is_not_streamed_as_the_agents_text(lrt: Runtime) -> None:
    """A tool that calls a model of its own: that model's text is the tool's business, not
    a turn of the agent. Streamed, it showed up in the chat and, streamed under the turn
    of the agent's next reply (no AI message is added while a tool runs), ran into it."""
    session = Runtime.new_session_id()
    worker = Worker(lrt, timer_tick=0.01)
    run_id = await lrt.start(summarizing_wf, session=session)
    await worker.drain()
    assert await lrt.wait(run_id, timeout=5) == "Here it is."
    shown: dict[str, str] = {}
    for m in await outbox(lrt, session):
        if m["type"] == "text":
            shown[m["message_id"]] = shown.get(m["message_id"], "") + m["delta"]
    prefix = f"{run_id}:lc_summarizing_step-0"
    assert shown == {f"{prefix}:0": "Let me summarize. ", f"{prefix}:1": "Here it is."}

"""The agent loop: :func:`run_agent` drives the graph from inside a ``@step``, one stream
of it at a time, suspending durably on a hook at each human-tool call and checkpointing the
transcript so that nothing answered (no model turn, no tool call) runs again on resume."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import asdict
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.graph import END

from ..._codec import encode_value
from ...engine.signals import Blocked, StepScope, current_step
from ...errors import InvalidPayload, NondeterminismError, PayloadTooLarge, UsageError
from ...workflow import (
    current_run,
    delete_step_checkpoint,
    emit,
    load_step_checkpoint,
    save_step_checkpoint,
    step_hook,
)
from ._agent_graph import next_node, surfaced
from ._human_tools import HumanRequest, HumanTool, HumanTools, OnCreated
from ._human_tools import by_name as human_by_name
from ._tool_runs import ToolRuns
from ._transcript import decode_transcript, encode_transcript, with_last_call_ids

CHECKPOINT_VERSION = 1
OnText = Callable[[int, str], Awaitable[None]]


async def run_agent(
    graph: Any,
    messages: Sequence[BaseMessage],
    human_tools: Sequence[HumanTool],
    *,
    on_created: OnCreated | None = None,
    on_text: OnText | None = None,
    stream: bool = True,
    durable_steps: bool = True,
    config: RunnableConfig | None = None,
) -> list[BaseMessage]:
    """Drive ``graph`` (state: ``messages``) from inside a ``@step`` until the agent
    answers, suspending durably at each human-tool call. Returns the final transcript.

    ``messages`` is used on the step's first execution only; after a suspension the
    checkpointed transcript is the truth. ``on_created(token, request)`` runs when a
    person is asked (the engine already put the prompt in the run's chat session).
    Streamed text goes to ``on_text(turn, delta)``, by default to the chat session as
    ``{"type": "text", "message_id": "<run>:<step>:<turn>", "seq", "delta"}`` frames
    (``<step>``: the step's id, so that two agent steps of one run are two messages of the
    chat, and a re-executed step streams under the ids it had).
    ``durable_steps`` checkpoints the transcript after each graph superstep (one round
    trip each); without it, work done since the last suspension re-runs after a crash.
    """
    by_name = human_by_name(human_tools)
    _once_per_step()
    checkpoint = await load_step_checkpoint()
    if checkpoint is None:
        transcript, pending, answered = with_last_call_ids(messages), None, []
    else:
        run_id = current_run().run_id
        if checkpoint.get("v") != CHECKPOINT_VERSION:
            version = checkpoint.get("v")
            raise UsageError(f"unknown langchain checkpoint version {version!r}", run_id=run_id)
        transcript = decode_transcript(checkpoint["messages"])
        pending = HumanRequest(**checkpoint["pending"]) if checkpoint["pending"] else None
        answered = list(checkpoint["answered"])
        if pending is not None and pending.tool not in by_name:
            # The code changed under the waiting run (the tool renamed or removed): blocked
            # like a renamed step_hook, until code that has the tool retries it, rather
            # than failed with the person's answer unused.
            raise Blocked(
                NondeterminismError(
                    f"the run waits on the human tool {pending.tool!r}, which this "
                    f"run_agent() was not given (it has {sorted(by_name)})",
                    run_id=run_id,
                    recorded=pending.tool,
                )
            )
    # step_hook ids count calls per name within one execution of the step: walk past the
    # rounds already answered (each returns its recorded answer at once, no I/O).
    for name in answered:
        await step_hook(name, on_timeout="return")
    text_out = on_text if on_text is not None else _session_text() if stream else None

    async def save(at: list[BaseMessage], asked: HumanRequest | None, defer: bool) -> None:
        pending_state = None if asked is None else asdict(asked)
        state = {"v": CHECKPOINT_VERSION, "messages": encode_transcript(at), "answered": answered}
        try:
            await save_step_checkpoint({**state, "pending": pending_state}, defer=defer)
        except PayloadTooLarge:
            raise
        except InvalidPayload as exc:  # not JSON: say which message, not only "checkpoint"
            raise InvalidPayload(_not_json(at, exc.message), run_id=exc.run_id) from exc

    async def progress(at: list[BaseMessage]) -> None:
        # Durable after every graph superstep: a crash mid-agent resumes from here, so a
        # model turn or a side-effecting tool that finished is not run again.
        await save(at, None, defer=not durable_steps)

    while True:
        if pending is not None:
            tool = by_name[pending.tool]
            answer = await step_hook(
                tool.name,
                timeout=tool.timeout,
                on_created=_bind_on_created(on_created, pending),
                schema=tool.schema_for(pending.args),
                on_timeout="return",
                prompt=tool.prompt_for(pending.args),
            )
            transcript.append(tool.result_message(answer, pending))
            answered.append(tool.name)
        # Several human calls in one AI message are asked one after the other.
        pending = surfaced(transcript, by_name)
        if pending is None:
            transcript = await _drive(graph, transcript, by_name, text_out, progress, config)
            # Another graph's model may call a human tool without an id: one to answer by.
            transcript = with_last_call_ids(transcript)
            pending = surfaced(transcript, by_name)
        if pending is None:
            await delete_step_checkpoint()
            return transcript
        # Deferred: written atomically with the hook.created of the step_hook just below.
        await save(transcript, pending, defer=True)


# The step execution (its StepScope, new for each attempt) that called run_agent() last.
_driving: ContextVar[StepScope | None] = ContextVar("parley_langchain_driving", default=None)


def _once_per_step() -> None:
    """Refuse a second run_agent() in one execution of a step. The agent's checkpoint is
    the step's one checkpoint: on re-execution the first agent would resume from the
    second one's (its transcript, its pending question) and carry on its conversation,
    and both would stream under the same message ids."""
    scope = current_step.get()
    if scope is None:
        return  # not in a step: load_step_checkpoint() says so
    if _driving.get() is scope:
        raise UsageError(
            f"run_agent() was called twice in step {scope.step_id!r}: the agent's "
            "checkpoint is the step's, so each agent needs a step of its own",
            run_id=current_run().run_id,
        )
    _driving.set(scope)


def _not_json(transcript: Sequence[BaseMessage], why: str) -> str:
    """``why`` the transcript's checkpoint was refused, with the first message at fault
    (a tool's artifact or a model's metadata that is not JSON): which tool, which call."""
    for n, message in enumerate(transcript):
        try:
            encode_value(encode_transcript([message]), what="", limit=sys.maxsize)
        except InvalidPayload:
            where = [type(message).__name__]
            if isinstance(message, ToolMessage):
                where += [f"tool {message.name!r}", f"call {message.tool_call_id!r}"]
            return f"message {n} of the agent's transcript ({', '.join(where)}) is not JSON: {why}"
    return why


def _bind_on_created(
    on_created: OnCreated | None, request: HumanRequest
) -> Callable[[str], Awaitable[None] | None] | None:
    if on_created is None:
        return None  # lets the engine record hook + suspension in one round trip

    def bound(token: str) -> Awaitable[None] | None:
        return on_created(token, request)

    return bound


def _session_text() -> OnText:
    here = current_run()
    # The widget keys a message by its id: the step's (deterministic, the same on every
    # execution of the step) keeps two agent steps of the run apart.
    prefix = f"{here.run_id}:{here.step_id}"
    seqs: dict[int, int] = {}

    async def send(turn: int, delta: str) -> None:
        # Ids are (run, step, turn, seq): if a crash makes a turn run again before it was
        # checkpointed, the page sees ids it already has and can drop the repeats.
        seq = seqs.get(turn, 0)
        seqs[turn] = seq + 1
        message = {"type": "text", "message_id": f"{prefix}:{turn}", "seq": seq, "delta": delta}
        await emit(message)

    return send


async def _drive(
    graph: Any,
    transcript: list[BaseMessage],
    human: HumanTools,
    on_text: OnText | None,
    progress: Callable[[list[BaseMessage]], Awaitable[None]],
    config: RunnableConfig | None,
) -> list[BaseMessage]:
    """One ``astream`` of the graph from ``transcript``; returns the transcript it ended
    with. Only text the model produces now is streamed: the seeded turns are input."""
    latest = transcript
    seen = {m.id for m in transcript if m.id}
    modes = ["values", "messages"] if on_text is not None else ["values"]
    tool_runs = ToolRuns()  # the text of a model a tool calls is not the agent's
    if on_text is not None:
        config = merge_configs(config, {"callbacks": [tool_runs]})
    chunks = graph.astream({"messages": transcript}, config, stream_mode=modes)
    try:
        async for mode, data in chunks:
            if mode == "values":
                fresh_state = len(data["messages"]) > len(latest)
                latest = list(data["messages"])
                if surfaced(latest, human) is not None:
                    break  # foreign graphs: stop before their tool node runs a human tool
                if fresh_state and next_node(latest, human) != END:  # END: final answer
                    await progress(latest)
            elif on_text is not None:
                chunk = data[0]
                fresh = isinstance(chunk, AIMessage | AIMessageChunk) and chunk.id not in seen
                if fresh and not tool_runs.quiet(chunk) and (delta := chunk.text):
                    await on_text(sum(isinstance(m, AIMessage) for m in latest), delta)
    finally:
        await chunks.aclose()  # nothing of the graph outlives the step's suspension
    return latest

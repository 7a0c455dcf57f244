"""The demo: a support-agent workflow whose step runs an agent loop over a scripted model
and asks the visitor questions through ``step_hook`` (a tool call surfaced out of the
agent loop, then a durable wait at the step boundary).

When the ``ask_visitor`` tool surfaces a :class:`HookInterrupt`, the step checkpoints the
transcript and the pending tool call, then suspends in ``step_hook``. On resume the step
re-executes from the top: it restores the transcript from the checkpoint, appends the
answer (or "the visitor did not respond" on timeout) as the tool result and continues the
loop — earlier model turns are not re-run, so their streamed text is not shown again.

Memory: the workflow returns ``{"reply", "memory"}``; the server starts the session's next
run with that ``memory`` (``server.sessions``), so the agent sees the earlier exchanges —
the visitor's messages, its questions and their answers, its replies — as plain messages.
At most :data:`MEMORY_MESSAGES` messages of at most :data:`MEMORY_CHARS` characters each
are kept (the oldest dropped).

The model: a scripted one (no network, no key), or with ``PARLEY_DEMO_MODEL`` set, that
LangChain chat model (``examples.models``, streaming) behind the same interface
(``chat_model.ChatModelAdapter``): the same loop, tools and durable ``ask_visitor``.

Environment (read by the worker, see ``runtime.settings.DemoSettings``):
``PARLEY_DEMO_PROMPT_TIMEOUT`` (default ``10m``), ``PARLEY_DEMO_CHUNK_DELAY`` seconds between
the scripted model's streamed chunks (default ``0.03``), ``PARLEY_DEMO_MODEL`` (and its
``_BASE_URL``, ``_API_KEY``).
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

import orjson

from runtime import (
    STEP_HOOK_TIMEOUT,
    current_run,
    delete_step_checkpoint,
    emit,
    load_step_checkpoint,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)
from runtime.settings import DemoSettings

from .. import trace
from ..models import build_configured_model, configured_model
from .agent import TOOLS, HookInterrupt, run_agent
from .model import NO_RESPONSE, CallCounter, Message, Model, ScriptedModel

__all__ = ["agent_step", "support_agent"]

log = logging.getLogger("parley.demo")

SYSTEM = "You are Parley's support agent. Use the tools; ask the visitor when unsure."
MEMORY_MESSAGES = 20
MEMORY_CHARS = 1000


def demo_model(settings: DemoSettings, count: CallCounter) -> Model:
    """The scripted model, or the one ``PARLEY_DEMO_MODEL`` names (built once a process)."""
    if settings.model is None:
        return ScriptedModel(chunk_delay=settings.chunk_delay, count=count)
    from .chat_model import ChatModelAdapter

    return ChatModelAdapter(configured_model(settings), count=count)


def hook_name(tool_call_id: str) -> str:
    """The hook of an ``ask_visitor`` call: named by the call's id (a model's ids may hold
    characters a hook name may not: then by a digest of it)."""
    if re.fullmatch(r"[A-Za-z0-9_-]{1,50}", tool_call_id):
        return f"ask_visitor-{tool_call_id}"
    return f"ask_visitor-{hashlib.sha256(tool_call_id.encode()).hexdigest()[:32]}"


class AgentRun:
    """The run the agent step executes in: counts its calls, streams its text."""

    def __init__(self) -> None:
        self.run_id = current_run().run_id
        self._seq: dict[int, int] = {}

    async def count(self, field: str) -> None:
        """Counted in the demo's trace (``examples.trace``): ``turn:<n>`` model calls per
        turn, ``on_created``."""
        trace.count(self.run_id, field)

    async def count_model_call(self, turn: int) -> None:
        await self.count(f"turn:{turn}")

    async def text(self, turn: int, chunk: str) -> None:
        """Stream a chunk of turn ``turn``'s text to the session. Ids are deterministic
        (run, turn, seq): a turn re-run after a crash repeats ids the page already has."""
        seq = self._seq.get(turn, 0)
        self._seq[turn] = seq + 1
        await emit(
            {"type": "text", "message_id": f"{self.run_id}:{turn}", "seq": seq, "delta": chunk}
        )


def answer_schema(args: dict[str, Any]) -> dict[str, Any]:
    question = str(args.get("question", ""))
    choices = args.get("choices")
    if choices:
        return {"type": "string", "enum": list(choices), "title": question}
    return {"type": "string", "minLength": 1, "maxLength": 500, "title": question}


def as_text(answer: Any) -> str:
    return answer if isinstance(answer, str) else orjson.dumps(answer).decode()


def remember(messages: list[Message]) -> list[Message]:
    """The conversation as plain messages, bounded: what the next run starts from."""
    out: list[Message] = []
    asked: dict[str, str] = {}
    for m in messages:
        if m["role"] == "user":
            out.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            for call in m.get("tool_calls") or []:
                if call["name"] == "ask_visitor":
                    asked[call["id"]] = str(call["args"].get("question", ""))
            if not m.get("tool_calls"):
                out.append({"role": "assistant", "content": m["content"]})
        elif m["role"] == "tool" and m["tool_call_id"] in asked:
            out.append({"role": "assistant", "content": asked[m["tool_call_id"]]})
            out.append({"role": "user", "content": m["content"]})
    return [
        {"role": m["role"], "content": str(m["content"])[:MEMORY_CHARS], "tool_calls": []}
        if m["role"] == "assistant"
        else {"role": m["role"], "content": str(m["content"])[:MEMORY_CHARS]}
        for m in out[-MEMORY_MESSAGES:]
    ]


@step(name="agent")
async def agent_step(message: str, memory: list[Message] | None = None) -> dict[str, Any]:
    ctx = AgentRun()
    settings = DemoSettings.from_env()
    model = demo_model(settings, ctx.count_model_call)
    checkpoint = await load_step_checkpoint()
    messages: list[Message]
    pending: dict[str, Any] | None
    if checkpoint is None:
        messages = [
            {"role": "system", "content": SYSTEM},
            *remember(memory or []),
            {"role": "user", "content": message},
        ]
        pending = None
    else:  # re-executed after a suspension: the transcript, not the model, is the truth
        messages, pending = checkpoint["messages"], checkpoint["pending"]

    async def surfaced(token: str) -> None:
        # The engine already wrote the prompt to the session outbox (atomically with the
        # hook); here the step only records that the visitor was prompted.
        log.info("run %s: asked the visitor (token %s)", ctx.run_id, token)
        await ctx.count("on_created")

    while True:
        if pending is not None:
            answer = await step_hook(
                pending["hook"],
                timeout=settings.prompt_timeout,
                on_created=surfaced,
                schema=answer_schema(pending["args"]),
                on_timeout="return",
                prompt=str(pending["args"].get("question", "")),
            )
            content = NO_RESPONSE if answer is STEP_HOOK_TIMEOUT else as_text(answer)
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": pending["tool_call_id"],
                    "name": "ask_visitor",
                    "content": content,
                }
            )
            pending = None
        try:
            reply = await run_agent(model, TOOLS, messages, ctx.text)
        except HookInterrupt as interrupt:
            pending = {
                "hook": hook_name(interrupt.tool_call_id),
                "tool_call_id": interrupt.tool_call_id,
                "args": interrupt.request,
            }
            await save_step_checkpoint({"messages": messages, "pending": pending})
            continue
        await delete_step_checkpoint()
        return {"reply": reply, "memory": remember(messages)}


@workflow(name="support_agent")
async def support_agent(message: str, memory: list[Message] | None = None) -> dict[str, Any]:
    """One visitor message → the agent's reply (it may ask the visitor on the way);
    ``memory``: the session's earlier exchanges, as the previous run returned them."""
    return await agent_step(message, memory)


build_configured_model()  # (now, not in the first step: examples/models.py)

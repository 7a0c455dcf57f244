"""A minimal tool-using agent loop, shaped like the agent frameworks (LangGraph and co.).

The loop turns tool errors into tool messages (like a "tool error middleware") — except
:class:`HookInterrupt`, which a human-in-the-loop tool raises to surface its request *out*
of the loop: suspending is the step's business, not the loop's. The loop can be seeded with
a transcript whose last assistant tool calls are (partly) answered: it runs the unanswered
ones and calls the model only after that, so earlier turns are never repeated.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .model import Message, Model, assistant_turns

Tool = Callable[..., Awaitable[str]]
OnTurnText = Callable[[int, str], Awaitable[None]]


class HookInterrupt(Exception):
    """A tool needs a person: carries the tool's args and, once raised through the loop,
    the id of the pending tool call."""

    def __init__(self, tool: str, args: dict[str, Any]) -> None:
        super().__init__(f"{tool} needs an answer from a person")
        self.tool = tool
        self.request = args
        self.tool_call_id = ""


KNOWLEDGE_BASE = {
    "crash": "'Workers that crash' — runs resume from their event log on another worker.",
    "slow": "'Tuning throughput' — add workers; they share the consumer group.",
}
DEFAULT_ARTICLE = "'Getting help' — most problems come from an unreachable Redis."


async def search_kb(query: str) -> str:
    for word, article in KNOWLEDGE_BASE.items():
        if word in query.lower():
            return article
    return DEFAULT_ARTICLE


async def ask_visitor(question: str, choices: list[str] | None = None) -> str:
    args: dict[str, Any] = {"question": question}
    if choices:
        args["choices"] = list(choices)
    raise HookInterrupt("ask_visitor", args)


TOOLS: dict[str, Tool] = {"search_kb": search_kb, "ask_visitor": ask_visitor}


async def run_agent(
    model: Model, tools: dict[str, Tool], messages: list[Message], on_text: OnTurnText
) -> str:
    """Run the loop on ``messages`` (mutated in place) until the model answers without a
    tool call; returns that answer. Raises :class:`HookInterrupt` with the transcript up to
    and including the assistant message that made the call."""
    while True:
        await _run_pending_tools(tools, messages)
        last = messages[-1]
        if last["role"] == "assistant" and not last["tool_calls"]:
            return str(last["content"])
        turn = assistant_turns(messages)

        async def emit(chunk: str, turn: int = turn) -> None:
            await on_text(turn, chunk)

        messages.append(await model.complete(messages, emit))


async def _run_pending_tools(tools: dict[str, Tool], messages: list[Message]) -> None:
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if last is None:
        return
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    for call in last["tool_calls"]:
        if call["id"] in answered:
            continue
        try:
            result = await tools[call["name"]](**call["args"])
        except HookInterrupt as interrupt:
            interrupt.tool_call_id = call["id"]
            raise
        except Exception as exc:  # the tool-error middleware: errors become tool results
            result = f"error: {type(exc).__name__}: {exc}"
        messages.append(
            {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": result}
        )

"""A deterministic scripted "LLM": no network, no API key.

It reads the transcript and answers the way a tool-using support model would: first it
searches the knowledge base, then it asks the visitor a question through the
``ask_visitor`` tool, then it writes the final answer from the tool results. Its text
arrives in chunks (streamed). Every call is counted — in memory and, when a counter is
given, durably (the crash test checks that a resumed run does not re-run earlier turns).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

Message = dict[str, Any]
OnText = Callable[[str], Awaitable[None]]
CallCounter = Callable[[int], Awaitable[None]]


class Model(Protocol):
    """What the agent loop calls: the scripted model, or a real one (``chat_model``)."""

    async def complete(self, messages: list[Message], on_text: OnText) -> Message:
        """The next assistant message; its text goes to ``on_text`` as it is generated."""
        ...


PRODUCTS = ["Parley Cloud", "Parley Self-hosted", "Something else"]
NO_RESPONSE = "the visitor did not respond"


def assistant_turns(messages: list[Message]) -> int:
    """Assistant messages since the visitor's latest message (this exchange's turns)."""
    return sum(1 for m in current_exchange(messages) if m["role"] == "assistant")


def current_exchange(messages: list[Message]) -> list[Message]:
    """The messages from the visitor's latest one on (earlier ones are the memory)."""
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=0)
    return messages[last_user:]


def known_product(messages: list[Message]) -> str | None:
    """A product the visitor named in an earlier exchange (the conversation's memory)."""
    earlier = messages[: len(messages) - len(current_exchange(messages))]
    for message in reversed(earlier):
        if message["role"] == "user" and message["content"] in PRODUCTS:
            return str(message["content"])
    return None


class ScriptedModel:
    def __init__(self, *, chunk_delay: float = 0.0, count: CallCounter | None = None) -> None:
        self.chunk_delay = chunk_delay
        self.count = count
        self.calls = 0

    async def complete(self, messages: list[Message], on_text: OnText) -> Message:
        """The next assistant message (``content`` and ``tool_calls``); its text is passed
        to ``on_text`` in chunks as it is "generated"."""
        turn = assistant_turns(messages)
        self.calls += 1
        if self.count is not None:
            await self.count(turn)
        content, tool_calls = self._script(messages, turn)
        for chunk in _chunks(content):
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            await on_text(chunk)
        return {"role": "assistant", "content": content, "tool_calls": tool_calls}

    def _script(self, messages: list[Message], turn: int) -> tuple[str, list[dict[str, Any]]]:
        exchange = current_exchange(messages)
        question = exchange[0]["content"]
        results = {m["tool_call_id"]: m["content"] for m in exchange if m["role"] == "tool"}
        if turn == 0 and LONG_ANSWER.search(question):
            return long_answer(), []
        if turn == 0:
            return "Let me look that up for you. ", [
                _call(turn, 0, "search_kb", {"query": question})
            ]
        product = known_product(messages)
        wants_email = bool(re.search(r"\b(e-?mail|contact)\b", question, re.I))
        if turn == 1 and product is not None and not wants_email:  # remembered earlier
            article = results.get("call-0-0", "")
            return (
                f"I found an article: {article} Since you use **{product}**: restart the "
                "worker, check that Redis is reachable, and your runs will resume where "
                "they stopped.",
                [],
            )
        if turn == 1:
            article = results.get("call-0-0", "")
            args: dict[str, Any] = (
                {"question": "Which email address should we use to reach you?"}
                if wants_email
                else {"question": "Which product are you using?", "choices": PRODUCTS}
            )
            return (
                f"I found an article: {article} To point you the right way, one question first.",
                [_call(turn, 0, "ask_visitor", args)],
            )
        answer = results.get(f"call-{turn - 1}-0", NO_RESPONSE)
        if answer == NO_RESPONSE:
            return (
                "I didn't hear back from you, so here is the general advice: restart the "
                "worker, check that Redis is reachable, and write to us if it persists.",
                [],
            )
        return (
            f"Thanks! For {answer}: restart the worker, check that Redis is reachable, and "
            "your runs will resume where they stopped.",
            [],
        )


LONG_ANSWER = re.compile(r"\b(everything|long answer|all the steps)\b", re.I)


def long_answer() -> str:
    """A long markdown answer (120 chunks of three words), for visitors who ask for it."""
    steps = [
        f"{i}. Check **step {i}** of the [runbook](https://example.org/runbook#{i}) now."
        for i in range(1, 45)
    ]
    return "Here is everything:\n\n" + "\n".join(steps) + "\n\nThat is all."


def _call(turn: int, n: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"call-{turn}-{n}", "name": name, "args": args}


def _chunks(text: str, words: int = 3) -> list[str]:
    parts = re.findall(r"\S+\s*", text)
    return ["".join(parts[i : i + words]) for i in range(0, len(parts), words)]

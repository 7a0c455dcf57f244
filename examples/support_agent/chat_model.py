"""The support agent on a real model: a LangChain chat model (the one ``PARLEY_DEMO_MODEL``
names, built by ``examples.models`` with ``init_chat_model``) behind the support agent's
model interface — ``complete(messages, on_text)`` returning the next assistant message —
so the agent loop, its tools and the durable ``ask_visitor`` path stay the same.

The transcript stays plain dicts (what the step checkpoints); it is converted to LangChain
messages for each call. The model's text is streamed chunk by chunk to ``on_text``; its
tool calls come back whole, with the ids the model gave them. Every call is counted like
the scripted model's (``turn:<n>``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .model import CallCounter, Message, OnText, assistant_turns

__all__ = ["TOOL_SPECS", "ChatModelAdapter"]

# The support agent's tools (examples.support_agent.agent.TOOLS), as the model sees them.
TOOL_SPECS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_kb",
            "description": "Search the knowledge base for an article about the visitor's problem.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "ask_visitor",
            "description": "Ask the visitor a question and wait for the answer.",
            "parameters": {
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "The question"},
                    "choices": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Answers to pick from, if any",
                    },
                },
                "required": ["question"],
            },
        },
    },
]


def to_langchain(messages: list[Message]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for m in messages:
        role, content = m["role"], str(m.get("content") or "")
        if role == "system":
            out.append(SystemMessage(content))
        elif role == "user":
            out.append(HumanMessage(content))
        elif role == "assistant":
            calls = [
                {"id": c["id"], "name": c["name"], "args": c["args"], "type": "tool_call"}
                for c in m.get("tool_calls") or []
            ]
            out.append(AIMessage(content=content, tool_calls=calls))
        elif role == "tool":
            out.append(ToolMessage(content, tool_call_id=m["tool_call_id"], name=m.get("name")))
    return out


class ChatModelAdapter:
    """A LangChain chat model as the support agent's model (``ScriptedModel``'s interface)."""

    def __init__(self, chat_model: Any, *, count: CallCounter | None = None) -> None:
        self.model = chat_model.bind_tools(TOOL_SPECS)
        self.count = count
        self.calls = 0

    async def complete(self, messages: list[Message], on_text: OnText) -> Message:
        turn = assistant_turns(messages)
        self.calls += 1
        if self.count is not None:
            await self.count(turn)
        whole: AIMessageChunk | None = None
        async for chunk in self.model.astream(to_langchain(messages)):
            if not isinstance(chunk, AIMessageChunk):
                continue
            text = chunk.text
            if text:
                await on_text(text)
            whole = chunk if whole is None else whole + chunk
        if whole is None:
            return {"role": "assistant", "content": "", "tool_calls": []}
        calls = [
            {"id": str(c["id"] or f"call-{turn}-{n}"), "name": c["name"], "args": dict(c["args"])}
            for n, c in enumerate(whole.tool_calls)
        ]
        return {"role": "assistant", "content": whole.text, "tool_calls": calls}

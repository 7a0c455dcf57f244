"""The agent's transcript: its JSON form for the step checkpoint, its final text, and the
tool calls of its newest AI message that are still unanswered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)


def _last_ai_at(messages: Sequence[BaseMessage]) -> int | None:
    for at in range(len(messages) - 1, -1, -1):
        if isinstance(messages[at], AIMessage):
            return at
    return None


def _last_ai(messages: Sequence[BaseMessage]) -> AIMessage | None:
    at = _last_ai_at(messages)
    return None if at is None else cast(AIMessage, messages[at])


def unanswered(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The newest AI message's tool calls that no ToolMessage after it answers yet, in
    order. Only the messages after it count: a call id is unique within one AI message,
    not across turns (some OpenAI-compatible servers number each reply's calls from
    ``call_0`` again), and an earlier turn's result must not pass for this one's."""
    at = _last_ai_at(messages)
    if at is None:
        return []
    last = cast(AIMessage, messages[at])
    answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ToolMessage)}
    return [dict(call) for call in last.tool_calls if call.get("id") not in answered]


def final_text(messages: Sequence[BaseMessage]) -> str:
    """The text of the agent's last AI message."""
    last = _last_ai(messages)
    return "" if last is None else last.text


def encode_transcript(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """JSON-ready transcript (LangChain's own serialization, not ad-hoc dicts, so tool
    calls, their ids and content blocks survive)."""
    return messages_to_dict(list(messages))


def decode_transcript(data: list[dict[str, Any]]) -> list[BaseMessage]:
    return messages_from_dict(data)

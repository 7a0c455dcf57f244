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
from langchain_core.messages.tool import ToolCall, tool_call


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


def with_call_ids(message: AIMessage, turn: int) -> AIMessage:
    """``message`` with an id for each tool call that has none (some models and servers
    give none): a call's result is matched to it by id. The id is made of the turn (the AI
    messages before this one) and the call's place, so a turn the model takes again after a
    crash gets the same ids."""
    if all(call.get("id") for call in message.tool_calls):
        return message
    taken = {call["id"] for call in message.tool_calls if call.get("id")}
    calls: list[ToolCall] = []
    for n, call in enumerate(message.tool_calls):
        call_id = call.get("id")
        if not call_id:
            call_id = f"call_parley_{turn}_{n}"
            while call_id in taken:
                call_id += "_"
            taken.add(call_id)
        calls.append(tool_call(name=call["name"], args=call["args"], id=call_id))
    return message.model_copy(update={"tool_calls": calls})


def with_last_call_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with ids for the tool calls of the newest AI message that have none."""
    at = _last_ai_at(messages)
    out = list(messages)
    if at is not None:
        turn = sum(isinstance(m, AIMessage) for m in messages[:at])
        out[at] = with_call_ids(cast(AIMessage, messages[at]), turn)
    return out


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

"""The LangChain demo: a LangGraph agent with a durable human-in-the-loop tool.

The model is a deterministic scripted ``BaseChatModel`` (no network, no key). It decides
from the transcript — not from how often it was called — so it answers the same way
after a crash or on another worker. Per run it counts, in Redis
(``parley:demo:lc:<run_id>``): ``turn:<n>`` model calls per turn, ``lookup_order`` calls
of the side-effecting tool, ``on_created`` prompts.

The script: look the order up (side effect), ask the visitor how to proceed (human tool,
multi-part content), ask again for the address when the visitor chose "reship" and the
message mentions an address, then answer; "no response" → a polite ending. An order is
"A-100"-like or a plain number of 3+ digits ("order 1234"); a message without one is about
the order of an earlier message of the conversation (its memory: the workflow returns
``memory``, the session's next run gets it back, at most :data:`MEMORY_MESSAGES` messages).

With ``PARLEY_DEMO_MODEL`` set, the same agent runs on that model (``init_chat_model``,
``examples.models``) instead of the script.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel, Field

from runtime import current_run, step, workflow
from runtime.integrations.langchain import (
    HumanRequest,
    HumanTool,
    create_agent_graph,
    encode_transcript,
    final_text,
    run_agent,
)
from runtime.settings import DemoSettings

from . import trace
from .models import build_configured_model, configured_model

__all__ = ["ScriptedChatModel", "ask_visitor", "langchain_agent", "lc_agent_step"]

SYSTEM = "You are Parley's order assistant. Look orders up; ask the visitor when unsure."
NO_RESPONSE = "The visitor did not respond."
CHOICES = ["refund", "reship"]
ORDER = re.compile(r"\b(?:[A-Z]-\d+|\d{3,})\b")
MEMORY_MESSAGES = 20


async def count(field: str) -> None:
    trace.count(current_run().run_id, field)


class AskArgs(BaseModel):
    question: str = Field(description="The question for the visitor")
    choices: list[str] | None = Field(default=None, description="Answers to pick from")


def answer_schema(args: dict[str, Any]) -> dict[str, Any]:
    if args.get("choices"):
        return {"type": "string", "enum": list(args["choices"]), "title": args["question"]}
    return {"type": "string", "minLength": 1, "maxLength": 500, "title": args["question"]}


ask_visitor = HumanTool(
    "ask_visitor",
    "Ask the visitor a question and wait for the answer.",
    AskArgs,
    answer_schema=answer_schema,
    timeout=DemoSettings.from_env().prompt_timeout,
    no_response=NO_RESPONSE,
)


@tool
async def lookup_order(order_id: str) -> str:
    """Look an order up in the order system (counted: a side effect)."""
    await count("lookup_order")
    return f"order {order_id}: shipped 12 days ago, parcel lost in transit"


def _call(turn: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{turn}_{name}", "type": "tool_call"}


class ScriptedChatModel(BaseChatModel):
    """Answers from the transcript; streams its text word by word; counts its calls."""

    counted: bool = True

    @property
    def _llm_type(self) -> str:
        return "parley-scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self  # the script knows its tools

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("the scripted model is async-only")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=await self._reply(messages))])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        reply = await self._reply(messages)
        if isinstance(reply.content, str):
            for word in re.findall(r"\S+\s*", reply.content):
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
                if run_manager is not None:
                    await run_manager.on_llm_new_token(word, chunk=chunk)
                yield chunk
            content: Any = ""
        else:
            content = reply.content  # content blocks arrive whole
        last = AIMessageChunk(content=content, tool_calls=reply.tool_calls)
        yield ChatGenerationChunk(message=last)

    async def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        exchange = messages[start:]  # before it: the conversation's memory
        turn = sum(isinstance(m, AIMessage) for m in exchange)
        if self.counted:
            await count(f"turn:{turn}")
        visitor = str(exchange[0].content)
        results = [m for m in exchange if isinstance(m, ToolMessage)]
        last = results[-1] if results and messages[-1] is results[-1] else None
        mentioned = [
            found
            for m in reversed(messages[: start + 1])
            if isinstance(m, HumanMessage)
            for found in ORDER.findall(str(m.content))
        ]
        order = (mentioned or ["A-100"])[0]
        if last is None:
            return AIMessage(
                "Let me look that order up. ",
                tool_calls=[_call(turn, "lookup_order", {"order_id": order})],
            )
        if last.name == "lookup_order":
            return AIMessage(
                content=[
                    {"type": "text", "text": "Your parcel was lost in transit. "},
                    {"type": "text", "text": "I can refund or reship it."},
                ],
                tool_calls=[
                    _call(
                        turn, "ask_visitor", {"question": "Refund or reship?", "choices": CHOICES}
                    )
                ],
            )
        if last.content == NO_RESPONSE:
            return AIMessage("I did not hear back; I left the order as it is. Write any time!")
        if last.content == "reship" and "address" in visitor.lower() and _asks(exchange) == 1:
            return AIMessage(
                "Sure. ",
                tool_calls=[
                    _call(turn, "ask_visitor", {"question": "Which address should we ship to?"})
                ],
            )
        answers = [str(m.content) for m in results if m.name == "ask_visitor"]
        return AIMessage(f"Done: {' / '.join(answers)} for order {order}. Anything else?")


def _asks(messages: list[BaseMessage]) -> int:
    return sum(isinstance(m, ToolMessage) and m.name == "ask_visitor" for m in messages)


def build_agent(tools: Sequence[BaseTool] = (lookup_order,), model: Any = None) -> Any:
    return create_agent_graph(model or ScriptedChatModel(), list(tools), [ask_visitor])


AGENT = build_agent()
_agents: dict[str, Any] = {}


def agent() -> Any:
    """The scripted agent, or one on ``PARLEY_DEMO_MODEL`` when that is set."""
    settings = DemoSettings.from_env()
    if settings.model is None:
        return AGENT
    if settings.model not in _agents:
        _agents[settings.model] = build_agent(model=configured_model(settings))
    return _agents[settings.model]


def remember(transcript: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """The visitor's messages and the agent's answers, as plain text, bounded."""
    out: list[dict[str, str]] = []
    for m in transcript:
        if isinstance(m, HumanMessage):
            out.append({"role": "user", "content": str(m.content)})
        elif isinstance(m, AIMessage) and not m.tool_calls and m.text:
            out.append({"role": "assistant", "content": m.text})
        elif isinstance(m, ToolMessage) and m.name == "ask_visitor":
            out.append({"role": "user", "content": f"(answered the agent) {m.content}"})
    return out[-MEMORY_MESSAGES:]


def recall(memory: Sequence[dict[str, str]] | None) -> list[BaseMessage]:
    return [
        HumanMessage(m["content"]) if m.get("role") == "user" else AIMessage(m["content"])
        for m in memory or []
        if isinstance(m, dict) and isinstance(m.get("content"), str)
    ]


async def _prompted(token: str, request: HumanRequest) -> None:
    # The engine already put the prompt into the session outbox with the hook; this only
    # records that the visitor was asked (the crash tests check it).
    await count("on_created")


@step(name="lc_agent")
async def lc_agent_step(
    message: str,
    prompt_timeout: float | None = None,
    memory: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    asker = ask_visitor if prompt_timeout is None else replace(ask_visitor, timeout=prompt_timeout)
    transcript = await run_agent(
        agent(),
        [SystemMessage(SYSTEM), *recall(memory), HumanMessage(message)],
        [asker],
        on_created=_prompted,
    )
    return {
        "reply": final_text(transcript),
        "transcript": encode_transcript(transcript),
        "memory": remember(transcript),
    }


@workflow(name="langchain_agent")
async def langchain_agent(
    message: str,
    prompt_timeout: float | None = None,
    memory: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """One visitor message → the agent's reply; the run's session is the chat.
    ``prompt_timeout`` (seconds) overrides how long the visitor has to answer; ``memory``
    is the conversation so far, as the session's previous run returned it."""
    result = await lc_agent_step(message, prompt_timeout, memory)
    return {
        "reply": result["reply"],
        "transcript": result["transcript"],
        "memory": result["memory"],
    }


build_configured_model()  # (now, not in the first step: examples/models.py)

"""The agent graph (model node + tool node) and its router, which ends the graph — instead
of executing — when only human-tool calls are left, so they surface as data."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph import END, START, MessagesState, StateGraph

from ...engine.failures import outage
from ...errors import UsageError
from ._human_tools import HumanRequest, HumanTool, HumanTools, check_names, run_id_or_none
from ._transcript import unanswered, with_call_ids


def _asks(call: dict[str, Any], human: HumanTools) -> bool:
    """A call the person answers: of a human tool, with arguments that fit it (one that
    does not fit goes to the tool node like an ordinary call, which answers the error)."""
    tool = human.get(call["name"])
    return tool is not None and tool.args_error(call["args"]) is None


def next_node(messages: Sequence[BaseMessage], human: HumanTools) -> str:
    if not messages:
        # Nothing to answer (the model would be called on nothing, which providers refuse).
        raise UsageError(
            "the agent graph was entered with no messages: give it at least the person's "
            "first message",
            run_id=run_id_or_none(),
        )
    calls = unanswered(messages)
    if not all(_asks(call, human) for call in calls):
        return "tools"  # ordinary calls first: their results belong before the person's
    if calls:
        return END  # only human calls left: surface them out of the graph
    if isinstance(messages[-1], AIMessage):
        return END  # the final answer
    return "model"


def surfaced(messages: Sequence[BaseMessage], human: HumanTools) -> HumanRequest | None:
    """The first pending human call, once no ordinary call of the same message is left."""
    calls = unanswered(messages)
    if not calls or not all(_asks(call, human) for call in calls):
        return None
    call = calls[0]
    return HumanRequest(tool=call["name"], args=dict(call["args"]), tool_call_id=call["id"])


def create_agent_graph(
    model: BaseChatModel, tools: Sequence[BaseTool], human_tools: Sequence[HumanTool]
) -> Any:
    """A ReAct-style agent (model node + tool node) that ends — instead of executing — when
    the model calls a human tool. It can be entered with any transcript: the entry router
    runs unanswered ordinary calls, else calls the model, else ends."""
    check_names([*(t.name for t in tools), *(t.name for t in human_tools)], "tool")
    human = {t.name: t for t in human_tools}
    by_name = {t.name: t for t in tools}
    bound = model.bind_tools([*tools, *(t.tool for t in human_tools)])

    async def call_model(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        reply = await bound.ainvoke(state["messages"], config)
        if isinstance(reply, AIMessage):  # a call without an id could not be answered
            reply = with_call_ids(reply, sum(isinstance(m, AIMessage) for m in state["messages"]))
        return {"messages": [reply]}

    async def call_tools(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        # A tool's own model calls are not the agent's text: streamed, they would show in
        # the chat as part of the agent's next reply (the turn that no AI message ends
        # while tools run). LangGraph's message stream leaves out runs tagged nostream.
        quiet: RunnableConfig = {**config, "tags": [*(config.get("tags") or []), TAG_NOSTREAM]}
        results: list[BaseMessage] = []
        for call in unanswered(state["messages"]):
            if (asked := human.get(call["name"])) is not None:
                if (error := asked.args_error(call["args"])) is not None:
                    results.append(_tool_error(call, f"invalid arguments: {error}"))
                continue  # a call that fits is the person's: surfaced out of the graph
            tool = by_name.get(call["name"])
            if tool is None:
                results.append(_tool_error(call, f"unknown tool {call['name']!r}"))
                continue
            try:
                results.append(await tool.ainvoke({**call, "type": "tool_call"}, quiet))
            except Exception as exc:  # like ToolNode: the model gets to see the error
                if outage(exc) is not None:
                    # Redis unreachable (a Runtime call in the tool): the step's outage,
                    # which abandons the execution to run again after it, not the tool's
                    # failure for the model to answer on.
                    raise
                results.append(_tool_error(call, f"{type(exc).__name__}: {exc}"))
        return {"messages": results}

    def route(state: MessagesState) -> str:
        return next_node(state["messages"], human)

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", call_tools)
    targets: dict[Hashable, str] = {"model": "model", "tools": "tools", END: END}
    graph.add_conditional_edges(START, route, targets)
    graph.add_conditional_edges("model", route, targets)
    graph.add_conditional_edges("tools", route, targets)
    return graph.compile()


def _tool_error(call: dict[str, Any], text: str) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=call["id"], name=call["name"], status="error")

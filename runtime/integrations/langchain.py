"""Durable human-in-the-loop tools for LangChain / LangGraph agents.

A LangChain user declares the tools a *person* answers with :class:`HumanTool`, builds the
agent with :func:`create_agent_graph` and drives it from a ``@step`` with
:func:`run_agent`::

    ask = HumanTool("ask_visitor", "Ask the visitor a question.", AskArgs,
                    answer_schema={"type": "string"}, timeout="10m")
    agent = create_agent_graph(model, tools=[lookup_order], human_tools=[ask])

    @step
    async def support(message: str) -> str:
        transcript = await run_agent(agent, [HumanMessage(message)], [ask])
        return final_text(transcript)

The seam: the model is bound to the human tools (it sees their name, description and args
schema), but no graph node ever executes them. The graph's router ends the graph when the
newest AI message carries an unanswered human-tool call (after running that message's
ordinary tool calls), so the request *surfaces out of the graph* as data — nothing is raised
inside it, and no tool-error middleware can swallow the suspension. :func:`run_agent` then
owns suspend/resume at the step boundary, where nothing can swallow it:

1. it checkpoints the transcript (LangChain's ``messages_to_dict``: tool-call ids and
   content blocks round-trip), the pending call's id and args;
2. it calls ``step_hook(tool.name, on_created=..., timeout=..., on_timeout="return")``,
   which suspends the run and frees the worker;
3. on resume the step re-executes: the transcript comes back with ``messages_from_dict``,
   the answer (or ``tool.no_response`` on timeout) is appended as the ``ToolMessage`` of the
   pending call, and the graph is seeded with that transcript. Its router goes straight to
   the model for the *next* turn: answered turns are not re-run (no model call, no tool
   call, no streamed text is repeated).

A human call whose arguments do not fit the tool's ``args_schema`` is not asked: the tool
node answers it with the validation error, as it answers an ordinary tool's, and the model
calls again.

Other graphs (e.g. ``create_react_agent``) work if a human call is never mixed with
ordinary calls in one AI message: :func:`run_agent` stops the stream before their tool node.
A human call there whose arguments do not fit goes to that node: LangGraph's ToolNode
answers it with the validation error when ``args_schema`` is a pydantic model; with a JSON
Schema dict nothing validates it and the tool raises :class:`HumanToolNotDriven`.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any, cast

try:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        AIMessageChunk,
        BaseMessage,
        ToolMessage,
        messages_from_dict,
        messages_to_dict,
    )
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from pydantic import BaseModel, ValidationError
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "runtime.integrations.langchain needs LangChain and LangGraph; install the extra: "
        "pip install 'parley[langchain]'"
    ) from exc

import orjson
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

from .._codec import Duration, encode_value
from ..engine.failures import outage
from ..engine.signals import Blocked
from ..errors import InvalidPayload, NondeterminismError, PayloadTooLarge, UsageError
from ..ids import NAME_RE
from ..workflow import (
    STEP_HOOK_TIMEOUT,
    current_run,
    delete_step_checkpoint,
    emit,
    load_step_checkpoint,
    save_step_checkpoint,
    step_hook,
)

__all__ = ["HumanRequest", "HumanTool", "create_agent_graph", "decode_transcript"]
__all__ += ["HumanToolNotDriven", "encode_transcript", "final_text", "run_agent"]

CHECKPOINT_VERSION = 1
OnText = Callable[[int, str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class HumanRequest:
    """One human-tool call the agent made: what ``on_created`` gets with the token."""

    tool: str
    args: dict[str, Any]
    tool_call_id: str


OnCreated = Callable[[str, HumanRequest], Awaitable[None] | None]


class HumanToolNotDriven(UsageError, RuntimeError):
    """A graph executed a human tool itself (it must end instead; see the module doc).
    A UsageError, so a step does not retry it: the graph would run the tool again."""

    code = "human_tool_not_driven"


@dataclass(frozen=True)
class HumanTool:
    """A tool a person answers. ``answer_schema`` (a JSON Schema, or a function of the call's
    args returning one) validates the answer on the resume path and lets the widget render
    the prompt; ``prompt`` is the text shown (default: the ``question``/``prompt`` arg, else
    the description). ``timeout`` is durable; when it passes the agent receives
    ``no_response`` as the tool result."""

    name: str
    description: str
    args_schema: type[BaseModel] | dict[str, Any]
    answer_schema: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]] | None = None
    timeout: Duration | None = None
    prompt: str | Callable[[dict[str, Any]], str] | None = None
    no_response: str = "The person did not respond in time."
    format_answer: Callable[[Any], str] | None = None

    def __post_init__(self) -> None:
        # The tool name is also the hook name: both must be valid before the model sees it.
        if not NAME_RE.fullmatch(self.name):
            raise UsageError(f"human tool name must match {NAME_RE.pattern}, got {self.name!r}")

    @cached_property
    def tool(self) -> BaseTool:
        """The LangChain tool to bind to the model. Its body never runs under
        :func:`run_agent`; if some other driver runs it, it fails loudly."""

        async def not_driven(**_: Any) -> str:
            try:
                run_id: str | None = current_run().run_id
            except UsageError:  # driven outside a run altogether
                run_id = None
            message = f"{self.name!r} ran inside the graph: use run_agent()"
            raise HumanToolNotDriven(message, run_id=run_id)

        return StructuredTool.from_function(
            coroutine=not_driven,
            name=self.name,
            description=self.description,
            args_schema=self.args_schema,
        )

    def args_error(self, args: dict[str, Any]) -> str | None:
        """Why the model's arguments do not fit ``args_schema`` (None: they do). No graph
        node runs a human tool, so nothing else checks them: a call that does not fit is
        answered with the error for the model to correct, as ToolNode answers a call of an
        ordinary tool, instead of asking the person on arguments the schema and prompt
        functions were not written for."""
        if isinstance(self.args_schema, dict):
            schema = self.args_schema
            error = best_match(validator_for(schema)(schema).iter_errors(args))
            return None if error is None else error.message
        try:
            self.args_schema.model_validate(args)
        except ValidationError as exc:  # what is wrong, without pydantic's links
            errors = exc.errors(include_url=False)
            return "; ".join(f"{'.'.join(map(str, e['loc'])) or '-'}: {e['msg']}" for e in errors)
        return None

    def schema_for(self, args: dict[str, Any]) -> dict[str, Any] | None:
        if callable(self.answer_schema):
            return self.answer_schema(args)
        return self.answer_schema

    def prompt_for(self, args: dict[str, Any]) -> str:
        if callable(self.prompt):
            return self.prompt(args)
        if self.prompt is not None:
            return self.prompt
        for key in ("question", "prompt"):
            if isinstance(args.get(key), str):
                return str(args[key])
        return self.description

    def result_message(self, answer: Any, call: HumanRequest) -> ToolMessage:
        if answer is STEP_HOOK_TIMEOUT:
            content = self.no_response
        elif self.format_answer is not None:
            content = self.format_answer(answer)
        else:
            content = answer if isinstance(answer, str) else orjson.dumps(answer).decode()
        return ToolMessage(content=content, tool_call_id=call.tool_call_id, name=self.name)


# transcript surgery ---------------------------------------------------------------------
def _last_ai_at(messages: Sequence[BaseMessage]) -> int | None:
    for at in range(len(messages) - 1, -1, -1):
        if isinstance(messages[at], AIMessage):
            return at
    return None


def _last_ai(messages: Sequence[BaseMessage]) -> AIMessage | None:
    at = _last_ai_at(messages)
    return None if at is None else cast(AIMessage, messages[at])


def _unanswered(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
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


HumanTools = Mapping[str, HumanTool]


def _asks(call: dict[str, Any], human: HumanTools) -> bool:
    """A call the person answers: of a human tool, with arguments that fit it (one that
    does not fit goes to the tool node like an ordinary call, which answers the error)."""
    tool = human.get(call["name"])
    return tool is not None and tool.args_error(call["args"]) is None


def _route(messages: Sequence[BaseMessage], human: HumanTools) -> str:
    calls = _unanswered(messages)
    if not all(_asks(call, human) for call in calls):
        return "tools"  # ordinary calls first: their results belong before the person's
    if calls:
        return END  # only human calls left: surface them out of the graph
    if isinstance(messages[-1], AIMessage):
        return END  # the final answer
    return "model"


def _surfaced(messages: Sequence[BaseMessage], human: HumanTools) -> HumanRequest | None:
    """The first pending human call, once no ordinary call of the same message is left."""
    calls = _unanswered(messages)
    if not calls or not all(_asks(call, human) for call in calls):
        return None
    call = calls[0]
    return HumanRequest(tool=call["name"], args=dict(call["args"]), tool_call_id=call["id"])


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


# the graph ------------------------------------------------------------------------------
def create_agent_graph(
    model: BaseChatModel, tools: Sequence[BaseTool], human_tools: Sequence[HumanTool]
) -> Any:
    """A ReAct-style agent (model node + tool node) that ends — instead of executing — when
    the model calls a human tool. It can be entered with any transcript: the entry router
    runs unanswered ordinary calls, else calls the model, else ends."""
    human = {t.name: t for t in human_tools}
    by_name = {t.name: t for t in tools}
    if clash := set(human) & set(by_name):
        raise UsageError(f"tool names used twice: {sorted(clash)}")
    bound = model.bind_tools([*tools, *(t.tool for t in human_tools)])

    async def call_model(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"], config)]}

    async def call_tools(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        results: list[BaseMessage] = []
        for call in _unanswered(state["messages"]):
            if (asked := human.get(call["name"])) is not None:
                if (error := asked.args_error(call["args"])) is not None:
                    results.append(_tool_error(call, f"invalid arguments: {error}"))
                continue  # a call that fits is the person's: surfaced out of the graph
            tool = by_name.get(call["name"])
            if tool is None:
                results.append(_tool_error(call, f"unknown tool {call['name']!r}"))
                continue
            try:
                results.append(await tool.ainvoke({**call, "type": "tool_call"}, config))
            except Exception as exc:  # like ToolNode: the model gets to see the error
                if outage(exc) is not None:
                    # Redis unreachable (a Runtime call in the tool): the step's outage,
                    # which abandons the execution to run again after it, not the tool's
                    # failure for the model to answer on.
                    raise
                results.append(_tool_error(call, f"{type(exc).__name__}: {exc}"))
        return {"messages": results}

    def route(state: MessagesState) -> str:
        return _route(state["messages"], human)

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


# the step helper ------------------------------------------------------------------------
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
    ``{"type": "text", "message_id": "<run>:<turn>", "seq", "delta"}`` frames.
    ``durable_steps`` checkpoints the transcript after each graph superstep (one round
    trip each); without it, work done since the last suspension re-runs after a crash.
    """
    by_name = {t.name: t for t in human_tools}
    checkpoint = await load_step_checkpoint()
    if checkpoint is None:
        transcript, pending, answered = list(messages), None, []
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
        pending = _surfaced(transcript, by_name)
        if pending is None:
            transcript = await _drive(graph, transcript, by_name, text_out, progress, config)
            pending = _surfaced(transcript, by_name)
        if pending is None:
            await delete_step_checkpoint()
            return transcript
        # Deferred: written atomically with the hook.created of the step_hook just below.
        await save(transcript, pending, defer=True)


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
    run_id = current_run().run_id
    seqs: dict[int, int] = {}

    async def send(turn: int, delta: str) -> None:
        # Ids are (run, turn, seq): if a crash makes a turn run again before it was
        # checkpointed, the page sees ids it already has and can drop the repeats.
        seq = seqs.get(turn, 0)
        seqs[turn] = seq + 1
        await emit({"type": "text", "message_id": f"{run_id}:{turn}", "seq": seq, "delta": delta})

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
    chunks = graph.astream({"messages": transcript}, config, stream_mode=modes)
    try:
        async for mode, data in chunks:
            if mode == "values":
                fresh_state = len(data["messages"]) > len(latest)
                latest = list(data["messages"])
                if _surfaced(latest, human) is not None:
                    break  # foreign graphs: stop before their tool node runs a human tool
                if fresh_state and _route(latest, human) != END:  # END: final answer
                    await progress(latest)
            elif on_text is not None:
                chunk = data[0]
                fresh = isinstance(chunk, AIMessage | AIMessageChunk) and chunk.id not in seen
                if fresh and (delta := chunk.text):
                    await on_text(sum(isinstance(m, AIMessage) for m in latest), delta)
    finally:
        await chunks.aclose()  # nothing of the graph outlives the step's suspension
    return latest

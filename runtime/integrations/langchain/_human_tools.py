"""The tools a person answers through a Parley hook: what the model is bound to, how a
call's arguments are checked, what the person is shown and what the model gets back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ValidationError

from ..._codec import Duration
from ...errors import UsageError
from ...ids import NAME_RE
from ...workflow import STEP_HOOK_TIMEOUT, current_run


@dataclass(frozen=True, slots=True)
class HumanRequest:
    """One human-tool call the agent made: what ``on_created`` gets with the token."""

    tool: str
    args: dict[str, Any]
    tool_call_id: str


OnCreated = Callable[[str, HumanRequest], Awaitable[None] | None]


class HumanToolNotDriven(UsageError, RuntimeError):
    """A graph executed a human tool itself (it must end instead; see the doc of
    :mod:`runtime.integrations.langchain`). A UsageError, so a step does not retry it: the
    graph would run the tool again."""

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
            message = f"{self.name!r} ran inside the graph: use run_agent()"
            raise HumanToolNotDriven(message, run_id=run_id_or_none())

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


HumanTools = Mapping[str, HumanTool]


def run_id_or_none() -> str | None:
    """The calling code's run, for an error to name (None: called outside a run)."""
    try:
        return current_run().run_id
    except UsageError:
        return None


def check_names(names: Iterable[str], what: str) -> None:
    """Refuse ``what`` (tools) of which two share a name: looked up by name, the second
    would silently hide the first, while the model is bound to both."""
    if twice := sorted(name for name, n in Counter(names).items() if n > 1):
        raise UsageError(f"{what} names used twice: {twice}", run_id=run_id_or_none())


def by_name(human_tools: Iterable[HumanTool]) -> dict[str, HumanTool]:
    tools = list(human_tools)
    check_names((t.name for t in tools), "human tool")
    return {t.name: t for t in tools}

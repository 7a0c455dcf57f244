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
calls again. A tool call the model gives no id (some servers do) gets one,
``call_parley_<turn>_<n>``, the same if the turn runs again; two tools of one name, or a
graph entered with no message, are a :class:`~runtime.errors.UsageError`, as is a second
:func:`run_agent` in one step (the agent's checkpoint is the step's: one agent per step).

Other graphs (e.g. ``create_react_agent``) work if a human call is never mixed with
ordinary calls in one AI message: :func:`run_agent` stops the stream before their tool node.
The text of a model that one of their tools calls is not streamed as the agent's, as in the
package's graph (a callback handler sees which model runs are inside a tool run).
A human call there whose arguments do not fit goes to that node: LangGraph's ToolNode
answers it with the validation error when ``args_schema`` is a pydantic model; with a JSON
Schema dict nothing validates it and the tool raises :class:`HumanToolNotDriven`.
"""

from __future__ import annotations

from importlib import import_module

# The extra's packages, checked here, before any module of the integration imports them, so
# that without the extra the import fails naming it. (A package's __init__ runs before its
# submodules: importing one of them directly is checked too.)
_NEEDS = (
    "langchain_core.language_models",
    "langchain_core.messages",
    "langchain_core.runnables",
    "langchain_core.tools",
    "langgraph.graph",
    "pydantic",
)
try:
    for _module in _NEEDS:
        import_module(_module)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "runtime.integrations.langchain needs LangChain and LangGraph; install the extra: "
        "pip install 'parley[langchain]'"
    ) from exc

# After the check (E402): the modules below import the extra's packages at their top.
from ._agent_graph import create_agent_graph  # noqa: E402
from ._agent_loop import run_agent  # noqa: E402
from ._human_tools import HumanRequest, HumanTool, HumanToolNotDriven  # noqa: E402
from ._transcript import decode_transcript, encode_transcript, final_text  # noqa: E402

__all__ = ["HumanRequest", "HumanTool", "create_agent_graph", "decode_transcript"]
__all__ += ["HumanToolNotDriven", "encode_transcript", "final_text", "run_agent"]

# Importable too, though not in __all__, as when they were defined here: the callbacks'
# types and the checkpoint format's version (``as``: re-exported for mypy --strict).
from ._agent_loop import CHECKPOINT_VERSION as CHECKPOINT_VERSION  # noqa: E402
from ._agent_loop import OnText as OnText  # noqa: E402
from ._human_tools import HumanTools as HumanTools  # noqa: E402
from ._human_tools import OnCreated as OnCreated  # noqa: E402

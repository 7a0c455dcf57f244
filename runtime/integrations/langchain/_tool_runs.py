"""Which streamed model chunks are a tool's own: the text of a model that a tool calls is
the tool's business, not the agent's reply. The package's graph runs its tools tagged
nostream; another graph's tool node (``create_react_agent``'s) does not, so its tools'
models stream like the agent's own. A callback handler that sees every run start tells
them apart by the run tree: a run started under a tool run is inside it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, GenerationChunk, LLMResult


class ToolRuns(BaseCallbackHandler):
    """Marks the messages the models inside tool runs stream (the very objects LangGraph's
    message stream hands on: its handler emits the chunk this one is given); ``quiet``
    tells whether a streamed message is one. One per stream of the graph."""

    # Called in order, in the loop, as the run tree grows: a tool's run is known inside
    # before its model's first chunk reaches the stream's reader.
    run_inline = True

    def __init__(self) -> None:
        self.inside: set[UUID] = set()  # tool runs and the runs they started, at any depth
        self.marked: dict[int, BaseMessage] = {}  # by id(): held, so no id() is reused

    def quiet(self, message: BaseMessage) -> bool:
        return id(message) in self.marked

    def _started(self, run_id: UUID, parent_run_id: UUID | None, tool: bool = False) -> None:
        if tool or parent_run_id in self.inside:
            self.inside.add(run_id)

    def _mark(self, run_id: UUID, message: BaseMessage) -> None:
        if run_id in self.inside:
            self.marked[id(message)] = message

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._started(run_id, parent_run_id, tool=True)

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._started(run_id, parent_run_id)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._started(run_id, parent_run_id)

    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        if isinstance(chunk, ChatGenerationChunk):
            self._mark(run_id, chunk.message)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        # A model that does not stream: the stream hands on its whole message.
        for generations in response.generations:
            for generation in generations:
                if isinstance(generation, ChatGeneration):
                    self._mark(run_id, generation.message)

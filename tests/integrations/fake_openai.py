"""A local OpenAI-compatible chat-completions endpoint (streaming, tool calls) that plays
a demo agent's part from the transcript it is sent, like a real model would — the order
assistant's (``order_script``, the ``/langchain`` demo) or the support agent's
(``support_script``, the ``/`` demo): the demos' ``PARLEY_DEMO_MODEL`` path is tested
against it (no hosted model is reachable).

It records every request and who sent it, and streams its final answer slowly, chunk by
chunk, so that a test can kill a worker in the middle of it (``final_started`` is set after
a few chunks).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from runtime.testing import free_port

FINAL_CHUNKS = 60
PRODUCTS = ["Parley Cloud", "Parley Self-hosted", "Something else"]
Plan = list[dict[str, Any]]


def final_text(answer: str) -> str:
    words = [f"Done: {answer} for order 1234."] + [f"w{i}" for i in range(FINAL_CHUNKS - 1)]
    return " ".join(words)


def support_final_text(answer: str) -> str:
    words = [f"Thanks! For {answer}: restart the worker."]
    return " ".join(words + [f"w{i}" for i in range(FINAL_CHUNKS - 1)])


def order_script(messages: list[dict[str, Any]]) -> Plan:
    """The order assistant: look the order up, ask refund or reship, answer."""
    last = messages[-1]
    if last["role"] == "user":
        return [{"tool": ("lookup_order", {"order_id": "1234"}), "id": "call_lookup"}]
    if last["role"] == "tool" and last.get("tool_call_id") == "call_lookup":
        return [
            {"text": "Your parcel was lost in transit. "},
            {
                "tool": (
                    "ask_visitor",
                    {"question": "Refund or reship?", "choices": ["refund", "reship"]},
                ),
                "id": "call_ask",
            },
        ]
    return [{"text": final_text(str(last["content"])), "final": True}]


def support_script(messages: list[dict[str, Any]]) -> Plan:
    """The support agent: search the knowledge base, ask for the product, answer."""
    last = messages[-1]
    if last["role"] == "user":
        return [
            {"text": "Let me look that up for you. "},
            {"tool": ("search_kb", {"query": str(last["content"])}), "id": "call_search"},
        ]
    if last["role"] == "tool" and last.get("tool_call_id") == "call_search":
        return [
            {"text": f"I found an article: {last['content']} One question first. "},
            {
                "tool": (
                    "ask_visitor",
                    {"question": "Which product are you using?", "choices": PRODUCTS},
                ),
                "id": "call_ask",
            },
        ]
    return [{"text": support_final_text(str(last["content"])), "final": True}]


class FakeOpenAI:
    def __init__(
        self,
        chunk_delay: float = 0.05,
        script: Callable[[list[dict[str, Any]]], Plan] = order_script,
    ) -> None:
        self.chunk_delay = chunk_delay
        self.script = script
        self.requests: list[dict[str, Any]] = []
        # Who sent each request: the name in the URL it was given (``url_for``), or None.
        self.senders: list[str | None] = []
        self.final_started = threading.Event()
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        routes = [
            Route("/v1/chat/completions", self.complete, methods=["POST"]),
            Route("/{sender}/v1/chat/completions", self.complete, methods=["POST"]),
        ]
        app = Starlette(routes=routes)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the fake endpoint did not start"
            time.sleep(0.02)

    def url_for(self, sender: str) -> str:
        """A base URL of this endpoint that names ``sender`` in ``senders``: give each
        process its own, and the requests say which one asked."""
        return f"http://127.0.0.1:{self.port}/{sender}/v1"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    async def complete(self, request: Request) -> StreamingResponse:
        body = orjson.loads(await request.body())
        self.senders.append(request.path_params.get("sender"))
        self.requests.append(body)
        plan = self.script(body["messages"])
        return StreamingResponse(self._stream(plan), media_type="text/event-stream")

    async def _stream(self, plan: Plan) -> AsyncIterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return b"data: " + orjson.dumps(data) + b"\n\n"

        yield chunk({"role": "assistant", "content": ""})
        finish = "stop"
        for part in plan:
            if "text" in part:
                words = part["text"].split(" ")
                for i, word in enumerate(words):
                    yield chunk({"content": word + (" " if i < len(words) - 1 else "")})
                    if part.get("final"):
                        if i == 10:
                            self.final_started.set()
                        await asyncio.sleep(self.chunk_delay)
            else:
                name, args = part["tool"]
                finish = "tool_calls"
                yield chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": part["id"],
                                "type": "function",
                                "function": {
                                    "name": name,
                                    "arguments": orjson.dumps(args).decode(),
                                },
                            }
                        ]
                    }
                )
        yield chunk({}, finish)
        yield b"data: [DONE]\n\n"

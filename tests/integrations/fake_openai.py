"""A local OpenAI-compatible chat-completions endpoint (streaming, tool calls) that plays
the order assistant's part from the transcript it is sent, like a real model would: the
demo's ``PARLEY_DEMO_MODEL`` path is tested against it (no hosted model is reachable).

It records every request, and streams its final answer slowly, chunk by chunk, so that a
test can kill a worker in the middle of it (``final_started`` is set after a few chunks).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from runtime.testing import free_port

FINAL_CHUNKS = 60


def final_text(answer: str) -> str:
    words = [f"Done: {answer} for order 1234."] + [f"w{i}" for i in range(FINAL_CHUNKS - 1)]
    return " ".join(words)


class FakeOpenAI:
    def __init__(self, chunk_delay: float = 0.05) -> None:
        self.chunk_delay = chunk_delay
        self.requests: list[dict[str, Any]] = []
        self.final_started = threading.Event()
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        app = Starlette(routes=[Route("/v1/chat/completions", self.complete, methods=["POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the fake endpoint did not start"
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    async def complete(self, request: Request) -> StreamingResponse:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        messages = body["messages"]
        last = messages[-1]
        if last["role"] == "user":
            plan: list[dict[str, Any]] = [
                {"tool": ("lookup_order", {"order_id": "1234"}), "id": "call_lookup"}
            ]
        elif last["role"] == "tool" and last.get("tool_call_id") == "call_lookup":
            plan = [
                {"text": "Your parcel was lost in transit. "},
                {
                    "tool": (
                        "ask_visitor",
                        {"question": "Refund or reship?", "choices": ["refund", "reship"]},
                    ),
                    "id": "call_ask",
                },
            ]
        else:
            plan = [{"text": final_text(str(last["content"])), "final": True}]
        return StreamingResponse(self._stream(plan), media_type="text/event-stream")

    async def _stream(self, plan: list[dict[str, Any]]) -> AsyncIterator[bytes]:
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

"""Both demos — the LangChain one and the ``/`` support agent (its own loop, through
``ChatModelAdapter``) — on a real model (``PARLEY_DEMO_MODEL``, LangChain
``init_chat_model``) served by a local OpenAI-compatible streaming endpoint: the same
tools, the same durable ``ask_visitor``, streamed text; a worker SIGKILLed in the middle of
the final answer is replaced and the run completes, its earlier turns not run again and
the visitor asked once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langchain_openai")

from examples import trace
from examples.support_agent import hook_name
from runtime import Runtime
from runtime.ids import NAME_RE
from tests.processes import PARTITIONS, WorkerProcess

from .fake_openai import (
    FINAL_CHUNKS,
    PRODUCTS,
    FakeOpenAI,
    final_text,
    support_final_text,
    support_script,
)

pytestmark = [pytest.mark.e2e, pytest.mark.redis]
APP = "examples.langchain_agent"


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()


@pytest.fixture
async def prt(redis_url: str) -> AsyncIterator[Runtime]:
    async with Runtime(redis_url, partitions=PARTITIONS) as runtime:
        yield runtime


async def outbox(rt: Runtime, session: str) -> list[dict[str, object]]:
    return [m for _, m in await rt.read_outbox(session, "0-0", count=10_000)]


async def test_the_demo_on_a_configured_model_survives_a_sigkill_mid_stream(
    redis_url: str, prt: Runtime, endpoint: FakeOpenAI, demo_trace: Path
) -> None:
    env = {
        "PARLEY_DEMO_MODEL": "openai:fake-model",
        "PARLEY_DEMO_MODEL_BASE_URL": endpoint.base_url,
        "PARLEY_DEMO_MODEL_API_KEY": "not-a-real-key",
    }
    workers = [WorkerProcess(redis_url, APP, lease=1.0, extra_env=env)]
    try:
        session = prt.new_session_id()
        await prt.store.create_session(session, 3600)
        run_id = await prt.start("langchain_agent", "where is my order 1234?", session=session)
        for _ in range(400):
            hooks = await prt.list_hooks("pending", run_id=run_id)
            if hooks:
                break
            await asyncio.sleep(0.05)
        [hook] = hooks
        assert hook.schema is not None and hook.schema["enum"] == ["refund", "reship"]
        await prt.resume_hook(hook.token, "refund")
        await asyncio.to_thread(endpoint.final_started.wait, 20)
        workers[0].kill()  # SIGKILL while the model streams the final answer
        workers.append(WorkerProcess(redis_url, APP, lease=1.0, extra_env=env))
        result = await prt.wait(run_id, timeout=60)
    finally:
        for worker in workers:
            worker.stop()
    assert result["reply"] == final_text("refund")
    # the side-effecting tool and the prompt ran once; only the interrupted turn re-ran
    counts = trace.counts(demo_trace, run_id)
    assert counts["lookup_order"] == 1 and counts["on_created"] == 1
    assert [m["messages"][-1]["role"] for m in endpoint.requests] == [
        "user",
        "tool",
        "tool",
        "tool",
    ]
    messages = await outbox(prt, session)
    assert sum(m["type"] == "prompt" for m in messages) == 1
    chunks = [m for m in messages if m["type"] == "text" and m["seq"] == 0]
    restarted = [m["message_id"] for m in chunks]
    final_id = restarted[-1]
    # the final message was streamed, cut, then streamed again from its first chunk
    assert restarted.count(final_id) == 2
    final = [m for m in messages if m["type"] == "text" and m["message_id"] == final_id]
    assert len(final) > FINAL_CHUNKS  # a partial stream and a whole one


def model_env(endpoint: FakeOpenAI) -> dict[str, str]:
    return {
        "PARLEY_DEMO_MODEL": "openai:fake-model",
        "PARLEY_DEMO_MODEL_BASE_URL": endpoint.base_url,
        "PARLEY_DEMO_MODEL_API_KEY": "not-a-real-key",
    }


async def test_the_support_demo_on_a_configured_model_survives_a_sigkill_mid_stream(
    redis_url: str, prt: Runtime, demo_trace: Path
) -> None:
    endpoint = FakeOpenAI(script=support_script)
    env = model_env(endpoint)
    app = "examples.support_agent"
    workers = [WorkerProcess(redis_url, app, lease=1.0, extra_env=env)]
    try:
        session = prt.new_session_id()
        await prt.store.create_session(session, 3600)
        run_id = await prt.start("support_agent", "my worker crashed", session=session)
        for _ in range(400):
            hooks = await prt.list_hooks("pending", run_id=run_id)
            if hooks:
                break
            await asyncio.sleep(0.05)
        [hook] = hooks
        # the model's own tool call, through the durable ask_visitor path
        assert hook.schema is not None and hook.schema["enum"] == PRODUCTS
        assert ".ask_visitor-call_ask." in hook.token
        await prt.resume_hook(hook.token, "Parley Cloud")
        await asyncio.to_thread(endpoint.final_started.wait, 20)
        workers[0].kill()  # SIGKILL while the model streams the final answer
        workers.append(WorkerProcess(redis_url, app, lease=1.0, extra_env=env))
        result = await prt.wait(run_id, timeout=60)
    finally:
        for worker in workers:
            worker.stop()
        endpoint.close()
    assert result["reply"] == support_final_text("Parley Cloud")
    assert {"role": "user", "content": "Parley Cloud"} in result["memory"]
    # the completed model calls and the prompt ran once; only the interrupted turn re-ran
    assert trace.counts(demo_trace, run_id) == {
        "turn:0": 1,
        "turn:1": 1,
        "turn:2": 2,
        "on_created": 1,
    }
    assert [m["messages"][-1]["role"] for m in endpoint.requests] == [
        "user",
        "tool",
        "tool",
        "tool",
    ]
    # the knowledge base was searched once: its one result is in every later transcript
    for request in endpoint.requests[1:]:
        results = [m for m in request["messages"] if m.get("tool_call_id") == "call_search"]
        assert len(results) == 1 and "Workers that crash" in results[0]["content"]
    assert endpoint.requests[1]["tools"][0]["function"]["name"] == "search_kb"
    messages = await outbox(prt, session)
    assert sum(m["type"] == "prompt" for m in messages) == 1
    first = [m for m in messages if m["type"] == "text" and m["message_id"] == f"{run_id}:0"]
    assert "".join(str(m["delta"]) for m in first) == "Let me look that up for you. "
    final = [m for m in messages if m["type"] == "text" and m["message_id"] == f"{run_id}:2"]
    # the final message was streamed, cut, then streamed again from its first chunk
    assert [m["seq"] for m in final].count(0) == 2
    assert len(final) > FINAL_CHUNKS  # a partial stream and a whole one


def test_a_tool_call_id_a_hook_name_cannot_hold_names_the_hook_by_a_digest() -> None:
    assert hook_name("call_ask") == "ask_visitor-call_ask"
    for odd in ("toolu:01/ÄB", "x" * 80):
        assert NAME_RE.fullmatch(hook_name(odd)) and hook_name(odd) == hook_name(odd)
    assert hook_name("a:b") != hook_name("a/b")

"""The LangChain demo on a real model (``PARLEY_DEMO_MODEL``, LangChain
``init_chat_model``) served by a local OpenAI-compatible streaming endpoint: the same
tools, the same durable ``ask_visitor``, streamed text; a worker SIGKILLed in the middle of
the final answer is replaced and the run completes, its earlier turns not run again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langchain_openai")

from examples import trace
from runtime import Runtime
from tests.processes import PARTITIONS, WorkerProcess

from .fake_openai import FINAL_CHUNKS, FakeOpenAI, final_text

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

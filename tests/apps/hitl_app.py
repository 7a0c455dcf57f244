"""Workflows executed by worker *processes* in the crash/zombie/scale tests.

Side effects are counted in Redis (``test:<what>:<run_id>``) so the test process can
check what ran where and how often.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import redis.asyncio as aioredis

from runtime import (
    STEP_HOOK_TIMEOUT,
    Runtime,
    current_run,
    load_step_checkpoint,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)

_client: aioredis.Redis | None = None
_runtime: Runtime | None = None


def counters() -> aioredis.Redis:
    global _client
    if _client is None:
        _client = aioredis.Redis.from_url(os.environ["PARLEY_TEST_REDIS"])
    return _client


async def count(what: str) -> int:
    return int(await counters().incr(f"test:{what}:{current_run().run_id}"))


async def _on_created(token: str) -> None:
    await counters().rpush(f"test:created:{token.split(':')[0]}", token)


@step
async def hitl(timeout: float | None) -> Any:
    checkpoint = await load_step_checkpoint()
    if checkpoint is None:
        await count("setup")
        await save_step_checkpoint({"setup": "done"})
    answer = await step_hook(
        "answer",
        timeout=timeout if timeout is not None else 3600,
        on_created=_on_created,
        on_timeout="return",
        prompt="Well?",
    )
    if answer is STEP_HOOK_TIMEOUT:
        return "timed out"
    await count("applied")
    return {"answer": answer, "setup": checkpoint or {"setup": "done"}}


@workflow(name="hitl")
async def hitl_wf(timeout: float | None = None) -> Any:
    return await hitl(timeout)


@step
async def two_rounds() -> list[Any]:
    first = await step_hook("round", on_created=_on_created)
    second = await step_hook("round", on_created=_on_created)
    return [first, second]


@workflow(name="two_rounds")
async def two_rounds_wf() -> list[Any]:
    return await two_rounds()


@step
async def answers_itself() -> Any:
    global _runtime
    if _runtime is None:
        _runtime = await Runtime(os.environ["PARLEY_TEST_REDIS"], partitions=4).connect()
    rt = _runtime

    async def answer_now(token: str) -> None:
        await _on_created(token)
        await rt.resume_hook(token, "fast")

    return await step_hook("quick", on_created=answer_now)


@workflow(name="fast_answer")
async def fast_answer_wf() -> Any:
    return await answers_itself()


@step
async def work(n: int) -> int:
    await count("exec")
    await asyncio.sleep(0.005)
    return n * 2


@workflow(name="batch")
async def batch_wf(n: int) -> int:
    return await work(n)


@step
async def slow_once() -> int:
    if await count("slow") == 1:
        await counters().set("test:zombie:entered", os.getpid())
        try:
            await asyncio.sleep(2.5)  # paused (SIGSTOP) in here; then tries to complete
        except asyncio.CancelledError:
            # its heartbeat found the lease lost and stopped the step: no write follows
            await counters().set("test:zombie:ended", f"stopped {os.getpid()}")
            raise
        # the step body is done: the execution now tries to record its result
        await counters().set("test:zombie:ended", f"returned {os.getpid()}")
    return os.getpid()


@workflow(name="zombie")
async def zombie_wf() -> int:
    return await slow_once()


@step
async def long_running() -> int:
    await count("long")
    await asyncio.sleep(2.5)  # longer than the 1 s lease: only the heartbeat keeps it
    return os.getpid()


@workflow(name="long_step")
async def long_step_wf() -> int:
    return await long_running()


@step
async def echo_answer() -> Any:
    """Uses nothing but the engine (for tests where Redis itself goes away)."""
    if await load_step_checkpoint() is None:
        await save_step_checkpoint({"asked": True})
    return {"answer": await step_hook("answer")}


@workflow(name="echo")
async def echo_wf() -> Any:
    return await echo_answer()


@step
async def chaos_rounds(timeouts: list[float]) -> list[Any]:
    """1-3 sequential rounds inside one step (the step re-executes from the top each time)."""
    out: list[Any] = []
    for timeout in timeouts:
        answer = await step_hook("q", timeout=timeout, on_timeout="return")
        out.append("timeout" if answer is STEP_HOOK_TIMEOUT else answer)
    return out


@workflow(name="chaos")
async def chaos_wf(timeouts: list[float]) -> list[Any]:
    return await chaos_rounds(timeouts)


@workflow(name="boom")
async def boom_wf() -> None:
    raise ValueError("boom")

"""Workflows for the outage and on_created tests: steps that write (or read) the store in a
loop while the test restarts Redis under them, and a step_hook whose ``on_created`` is
recorded in Redis (``test:asked:<run_id>``) so the test sees whether anyone was asked."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import redis.asyncio as aioredis

from runtime import (
    STEP_HOOK_TIMEOUT,
    Runtime,
    current_run,
    emit,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)

ROUNDS = 60  # x ROUND_SECONDS: each loop spans the ~1 s outage the tests cause
ROUND_SECONDS = 0.05

_runtime: Runtime | None = None
_client: aioredis.Redis | None = None


async def runtime() -> Runtime:
    """The worker process's own client of the store (what a step would use to inspect)."""
    global _runtime
    if _runtime is None:
        _runtime = await Runtime(os.environ["PARLEY_TEST_REDIS"], partitions=4).connect()
    return _runtime


def counters() -> aioredis.Redis:
    global _client
    if _client is None:
        _client = aioredis.Redis.from_url(os.environ["PARLEY_TEST_REDIS"])
    return _client


async def _write(kind: str, i: int) -> None:
    run = current_run()
    if kind == "emit":
        await emit({"type": "text", "text": f"round {i}"})
    elif kind == "post":
        assert run.session is not None
        await (await runtime()).post_to_session(run.session, {"type": "text", "text": str(i)})
    elif kind == "checkpoint":
        await save_step_checkpoint({"round": i})
    elif kind == "inspect":
        info = await (await runtime()).get_run(run.run_id)
        assert info.run_id == run.run_id
        await (await runtime()).list_hooks(run_id=run.run_id)
    else:
        raise ValueError(f"unknown kind {kind!r}")


@step
async def write_loop(kind: str) -> int:
    for i in range(ROUNDS):
        await _write(kind, i)
        await asyncio.sleep(ROUND_SECONDS)
    return ROUNDS


@workflow(name="write_loop")
async def write_loop_wf(kind: str) -> int:
    return await write_loop(kind)


@workflow(name="emit_in_body")
async def emit_in_body_wf() -> int:
    """emit() from the workflow body (not a step) rides out an outage too."""
    for i in range(ROUNDS):
        await emit({"type": "text", "text": f"body {i}"})
        await asyncio.sleep(ROUND_SECONDS)
    return ROUNDS


async def _ask(token: str) -> None:
    """Ask (record): the token, when (Redis' clock, as the log's timestamps) and the
    deadline the hook had then (what the person would be told)."""
    run_id = token.split(":")[0]
    seconds, micros = await counters().time()
    [hook] = await (await runtime()).list_hooks(run_id=run_id)
    assert hook.expires_at is not None
    entry = f"{token}@{seconds * 1000 + micros // 1000}@{int(hook.expires_at * 1000)}"
    await counters().rpush(f"test:asked:{run_id}", entry)


@step
async def ask_briefly(timeout: float) -> Any:
    answer = await step_hook("brief", timeout=timeout, on_created=_ask, on_timeout="return")
    return "timed out" if answer is STEP_HOOK_TIMEOUT else {"answer": answer}


@workflow(name="ask_briefly")
async def ask_briefly_wf(timeout: float) -> Any:
    return await ask_briefly(timeout)

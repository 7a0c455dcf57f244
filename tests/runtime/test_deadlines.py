"""The deadline scan, driven one pass at a time (``Worker.fire_due``): a due deadline fires
on the first pass after it is due, a later one does not, and an answer and an expiry of
one hook exclude each other. No timing is asserted: each test waits until the clock is
past the deadline, then checks what one pass did. (SOON only has to outlast the drain
that suspends the run, which fires what is due as it goes.)"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from runtime import (
    STEP_HOOK_TIMEOUT,
    HookExpired,
    RunStatus,
    Runtime,
    Worker,
    hook,
    sleep,
    step,
    step_hook,
    workflow,
)
from tests.raw_redis import raw

SOON = "400ms"


@step
async def ask_with_deadline(timeout: str) -> Any:
    answer = await step_hook("q", timeout=timeout, on_timeout="return")
    return "timed out" if answer is STEP_HOOK_TIMEOUT else answer


@workflow(name="deadline_wf")
async def deadline_wf(timeout: str) -> Any:
    return await ask_with_deadline(timeout)


async def _suspended(rt: Runtime, worker: Worker, timeout: str) -> tuple[str, Any]:
    run_id = await rt.start(deadline_wf, timeout)
    await worker.drain()
    [pending] = await rt.list_hooks(None, run_id=run_id)
    assert pending.status.value == "pending", "the drain outlasted the deadline"
    assert pending.expires_at is not None
    return run_id, pending


async def _until_past(expires_at: float) -> None:
    """Until the clock the scripts use is past the deadline (they compare milliseconds)."""
    while int(time.time() * 1000) <= int(expires_at * 1000):
        await asyncio.sleep(0.005)


async def _types(rt: Runtime, run_id: str) -> list[str]:
    return [e.type for e in await rt.events(run_id)]


async def test_a_due_deadline_fires_and_a_later_one_waits(rt: Runtime, worker: Worker) -> None:
    soon, soon_hook = await _suspended(rt, worker, SOON)
    later, later_hook = await _suspended(rt, worker, "1h")
    await _until_past(soon_hook.expires_at)
    await worker.fire_due()  # one pass
    assert (await _types(rt, soon)).count("hook.expired") == 1
    assert (await rt.get_run(soon)).status is RunStatus.PENDING  # enqueued to resume
    assert [h.token for h in await rt.list_hooks()] == [later_hook.token]
    assert "hook.expired" not in await _types(rt, later)

    await worker.drain()
    assert await rt.wait(soon, timeout=5) == "timed out"
    assert (await rt.get_run(later)).status is RunStatus.SUSPENDED
    assert (await _types(rt, soon)).count("hook.expired") == 1  # fired once


async def test_an_answer_after_the_expiry_is_refused(rt: Runtime, worker: Worker) -> None:
    run_id, pending = await _suspended(rt, worker, SOON)
    await _until_past(pending.expires_at)
    await worker.fire_due()
    before = await _types(rt, run_id)
    with pytest.raises(HookExpired) as late:
        await rt.resume_hook(pending.token, "late")
    assert type(late.value) is HookExpired
    assert await _types(rt, run_id) == before  # exactly one of expired/received
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "timed out"
    types = await _types(rt, run_id)
    assert (types.count("hook.expired"), types.count("hook.received")) == (1, 0)


async def test_an_expiry_after_the_answer_fires_nothing(rt: Runtime, worker: Worker) -> None:
    run_id, pending = await _suspended(rt, worker, SOON)
    assert await rt.resume_hook(pending.token, "in time") is True
    await _until_past(pending.expires_at)
    await worker.fire_due()
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "in time"
    types = await _types(rt, run_id)
    assert (types.count("hook.expired"), types.count("hook.received")) == (0, 1)


@workflow(name="two_sleeps_wf")
async def two_sleeps_wf() -> str:
    await asyncio.gather(sleep(3600), sleep(7200))
    return "slept"


@workflow(name="asked_then_sleeps_wf")
async def asked_then_sleeps_wf() -> str:
    await hook("go")
    await sleep(30 * 86400)
    return "slept 30 days"


async def test_a_run_with_two_sleeps_leaves_no_deadline_for_the_next_run_of_its_id(
    rt: Runtime, worker: Worker
) -> None:
    """Two sleeps pending at once, then the run is cancelled and, its retention past, its
    id is used again: the new run's 30-day sleep waits. Before, the run named only its last
    timer, its end left the other's deadline, and at that deadline the new run got a
    timer.fired for its own first sleep, which then returned at once."""
    store = raw(rt)
    run_id = await rt.start(two_sleeps_wf, run_id="reused-id-1")
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await rt.cancel(run_id)
    deadlines = store.run_keys(run_id).deadlines
    assert await store.client.zcard(deadlines) == 0
    for key in await store.client.keys(f"*{run_id}*"):  # the retention passes
        await store.client.delete(key)
    again = await rt.start(asked_then_sleeps_wf, run_id="reused-id-1")
    await worker.drain()
    await store.fire_due(limit=100, now_ms=await store.now_ms() + 7_201_000)
    [go] = await rt.list_hooks(run_id=again)
    await rt.resume_hook(go.token, "go")
    await worker.drain()
    assert (await rt.get_run(again)).status is RunStatus.SUSPENDED  # sleeping 30 days
    assert "timer.fired" not in await _types(rt, again)

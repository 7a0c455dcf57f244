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
    step,
    step_hook,
    workflow,
)

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

"""Workers heal: a consumer group lost with Redis' data is re-created and the workflows are
announced again; a background loop that crashes is restarted (runtime/worker/supervisor.py).
The empty-Redis restart with real processes is tests/deploy/test_empty_redis.py."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from runtime import RunStatus, Runtime, Worker, workflow
from runtime.metrics import Metrics
from runtime.worker.supervisor import supervise
from tests.apps.restart_app import restart_echo
from tests.helpers import running
from tests.raw_redis import raw


async def _completed(rt: Runtime, run_id: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while (await rt.get_run(run_id)).status is not RunStatus.COMPLETED:
        assert time.monotonic() < deadline, f"run {run_id} did not complete"
        await asyncio.sleep(0.02)


async def test_a_lost_consumer_group_is_recreated_and_the_workflows_announced_again(
    rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    store = raw(rt)
    worker = Worker(rt, block_seconds=0.05, timer_tick=0.01)
    async with running(worker):
        await _completed(rt, await rt.start(restart_echo, "before"))
        # What Redis coming back empty does to a worker's state: the task streams with their
        # consumer group, and the workflow announcements, are gone.
        await store.client.delete(
            *(store.keys.key("tasks", p) for p in range(store.partitions)),
            store.keys.WORKFLOWS_KEY,
        )
        run_id = await rt.start(restart_echo, "after")
        await _completed(rt, run_id)
        assert "recreated" in caplog.text
        deadline = time.monotonic() + 5
        while not await store.workflow_announced("restart_echo"):
            assert time.monotonic() < deadline, "the workflows were not announced again"
            await asyncio.sleep(0.02)


async def test_a_worker_whose_deadline_loop_crashed_still_fires_deadlines(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = rt.store
    real_fire_due = store.fire_due
    crashes = 0

    async def fire_due_that_fails_once(*args: Any, **kwargs: Any) -> Any:
        nonlocal crashes
        if crashes == 0:
            crashes += 1
            raise RuntimeError("an unexpected bug in one pass")
        return await real_fire_due(*args, **kwargs)

    monkeypatch.setattr(store, "fire_due", fire_due_that_fails_once)
    worker = Worker(rt, timer_tick=0.01)
    async with running(worker):
        run_id = await rt.start(sleepy_wf)
        await _completed(rt, run_id)
    assert crashes == 1
    assert "deadline loop crashed; restarting it" in caplog.text
    sample = worker.metrics.registry.get_sample_value(
        "parley_worker_loop_restarts_total", {"loop": "deadline loop"}
    )
    assert sample == 1


@workflow(name="heal_sleepy_wf")
async def sleepy_wf() -> str:
    from runtime import sleep

    await sleep(0.05)
    return "woke"


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def test_supervise_restarts_a_loop_that_raises_or_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stopping = asyncio.Event()
    metrics = Metrics()
    calls = 0

    async def loop(stop: asyncio.Event) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ValueError("boom")
        if calls == 2:
            return  # ended although the worker still runs
        await stop.wait()

    with caplog.at_level(logging.INFO, logger="parley.worker"):
        task = asyncio.create_task(supervise("test loop", loop, stopping, metrics))
        await _until(lambda: calls >= 3, "the loop was not restarted twice")
        stopping.set()
        await asyncio.wait_for(task, 5)
    assert calls == 3
    assert "test loop crashed; restarting it" in caplog.text
    assert "test loop ended while the worker runs; restarting it" in caplog.text
    restarts = metrics.registry.get_sample_value(
        "parley_worker_loop_restarts_total", {"loop": "test loop"}
    )
    assert restarts == 2


async def test_supervise_restarts_a_loop_that_caught_a_cancellation_not_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A loop that raises CancelledError from something it awaited (a shared future that a
    cancelled caller failed) is restarted; only the supervising task's own cancellation
    ends it."""
    stopping = asyncio.Event()
    metrics = Metrics()
    calls = 0

    async def loop(stop: asyncio.Event) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            shared: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            shared.cancel()  # as a cancelled caller leaves a future others await
            await shared
        await stop.wait()

    with caplog.at_level(logging.INFO, logger="parley.worker"):
        task = asyncio.create_task(supervise("test loop", loop, stopping, metrics))
        await _until(lambda: calls >= 2, "the loop was not restarted")
        assert not task.done()
        task.cancel()  # its own cancellation ends it
        with pytest.raises(asyncio.CancelledError):
            await task
    assert "a cancellation it did not ask for" in caplog.text

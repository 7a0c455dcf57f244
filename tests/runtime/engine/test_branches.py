"""Branches: held waits of a gather's branches, let go together by one watcher."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterable
from typing import Any, cast

import pytest

from runtime import RunStatus, Runtime, Worker, emit, hook, workflow
from runtime.engine.branches import Branches, _hold
from runtime.engine.replay import ReplayIndex
from runtime.engine.writer import Writer
from runtime.errors import StoreUnavailable
from runtime.store.redis._sessions import SessionStore


@workflow(name="br_wide_gather")
async def br_wide_gather(n: int) -> list[Any]:
    return await asyncio.gather(*(hook(f"h{i}") for i in range(n)))


async def test_a_wide_gathers_suspension_waits_on_each_branch_a_bounded_number_of_times(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The futures every ``asyncio.wait`` of the execution waits on, counted while a gather
    of 200 hooks suspends: a few per branch. Before, each held wait waited on every other
    branch itself: 20,099 for 200 hooks (N²/2; 800 hooks took 37 s to suspend)."""
    waited_on = 0
    real_wait = asyncio.wait

    async def counting_wait(futures: Iterable[Any], **options: Any) -> Any:
        nonlocal waited_on
        futures = list(futures)
        waited_on += len(futures)
        return await real_wait(futures, **options)

    monkeypatch.setattr(asyncio, "wait", counting_wait)
    run_id = await rt.start(br_wide_gather, 200)
    await asyncio.wait_for(worker.drain(), timeout=30)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    assert len(await rt.list_hooks("pending", run_id=run_id)) == 200
    assert waited_on <= 4 * 200
    monkeypatch.undo()
    for pending in await rt.list_hooks("pending", run_id=run_id):
        await rt.resume_hook(pending.token, pending.name)
    await asyncio.wait_for(worker.drain(), timeout=30)
    assert await rt.wait(run_id, timeout=5) == [f"h{i}" for i in range(200)]


class _NoWrites:
    writing = False


async def test_a_held_wait_takes_over_when_the_watcher_is_cancelled() -> None:
    """The watcher's task cancelled (a TaskGroup's sibling failed, a first() decided) hands
    the watch to another held wait, which lets go once the busy branch ends."""
    branches = Branches(ReplayIndex(), cast(Writer, _NoWrites()))
    branches.steps_running = 1  # (a step runs: waited for however long it takes)
    step_done = asyncio.Event()
    busy = asyncio.ensure_future(step_done.wait())
    branches.children.append(busy)
    watcher = asyncio.ensure_future(_hold(branches))
    await asyncio.sleep(0)
    follower = asyncio.ensure_future(_hold(branches))
    await asyncio.sleep(0)
    assert branches.watcher is watcher and branches.holding == {watcher, follower}
    watcher.cancel()
    await asyncio.sleep(0.01)
    assert watcher.cancelled()
    assert branches.watcher is follower and not follower.done()
    branches.steps_running = 0
    step_done.set()
    await asyncio.wait_for(follower, timeout=5)
    assert branches.watcher is None and branches.holding == set()


@workflow(name="br_left_task_aborted")
async def br_left_task_aborted() -> Any:
    async def tells() -> None:
        await emit({"type": "status", "text": "looking"})  # (the store is down: Abort)

    left = asyncio.ensure_future(tells())  # left behind, never awaited
    await asyncio.sleep(0)
    return [await hook("ask"), left.done()]


async def test_a_task_an_engine_signal_ended_is_not_logged_as_an_unretrieved_error(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A task of the workflow that the engine's Abort ended (its emit met an outage) and
    that nothing awaited: asyncio logged 'Task exception was never retrieved' (ERROR) for
    it when it was collected, a scary line for an execution that runs again as designed.
    Before, the full suite logged it once, for an Abort of a first() decision."""

    async def unreachable(*args: Any, **kwargs: Any) -> str:
        raise StoreUnavailable("the store is down (test)")

    monkeypatch.setattr(SessionStore, "post", unreachable)
    run_id = await rt.start(br_left_task_aborted, session=Runtime.new_session_id())
    await asyncio.wait_for(worker.drain(), timeout=10)
    gc.collect()
    await asyncio.sleep(0)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    assert "exception was never retrieved" not in caplog.text

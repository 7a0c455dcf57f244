"""Races and failure paths found in review: each test pins one fix."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from runtime import RunStatus, Runtime, Worker, hook, step, step_hook, workflow
from tests.helpers import running
from tests.raw_redis import as_queued_without_workflows, raw

calls: Counter[str] = Counter()
CURRENT: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()
    CURRENT.clear()


async def _answer_then_fail(token: str) -> None:
    calls["on_created"] += 1
    if calls["on_created"] == 1:
        await CURRENT["rt"].resume_hook(token, "fast")
        raise ConnectionError("the notifier failed after the visitor answered")


@step(retries=1, retry_delay=0)
async def answered_then_retried() -> Any:
    return await step_hook("q", on_created=_answer_then_fail)


@workflow(name="answered_then_retried_wf")
async def answered_then_retried_wf() -> Any:
    return await answered_then_retried()


async def test_an_answer_behind_a_later_write_is_not_lost(rt: Runtime, worker: Worker) -> None:
    # The answer lands while the step runs; the retry's write then moves past it. The run
    # must still see it (it used to suspend for ever, the answer recorded but unseen).
    CURRENT["rt"] = rt
    run_id = await rt.start(answered_then_retried_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "fast"


async def _fails_once(token: str) -> None:
    calls["notify"] += 1
    if calls["notify"] == 1:
        raise ConnectionError("notifier down")


@step(retries=1, retry_delay=0)
async def notifies() -> Any:
    return await step_hook("q", on_created=_fails_once)


@workflow(name="notifies_wf")
async def notifies_wf() -> Any:
    return await notifies()


async def test_on_created_is_called_again_after_it_raised(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(notifies_wf)
    await worker.drain()
    assert calls["notify"] == 2  # the retried step handed the token out after all
    [pending] = await rt.list_hooks()
    await rt.resume_hook(pending.token, "ok")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "ok"


async def _always_fails(token: str) -> None:
    raise ConnectionError("notifier down")


@workflow(name="fails_with_pending_hook")
async def fails_with_pending_hook() -> Any:
    return await hook("approve", timeout="1h", on_created=_always_fails)


async def test_a_run_that_ends_closes_its_pending_hooks(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(fails_with_pending_hook)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.FAILED
    assert await rt.list_hooks() == []
    [closed] = await rt.list_hooks(None, run_id=run_id)
    assert closed.status.value == "cancelled"
    assert (await rt.stats())["hooks_pending"] == 0
    assert (
        sum([await raw(rt).client.zcard(raw(rt).keys.key("deadlines", p)) for p in range(4)]) == 0
    )


@step(timeout=0.2, retries=1, retry_delay=0)
async def slow_write_step() -> Any:
    calls["attempts"] += 1
    return await step_hook("q", on_created=_count_created)


async def _count_created(token: str) -> None:
    calls["created"] += 1


@workflow(name="slow_write_wf")
async def slow_write_wf() -> Any:
    return await slow_write_step()


async def test_a_write_interrupted_by_a_step_timeout_restarts_from_the_log(
    rt: Runtime, worker: Worker
) -> None:
    batcher = raw(rt).scripts.batcher
    original = batcher._pipeline
    slowed = {"done": False}

    async def slow_once(batch: list[Any]) -> list[Any]:
        if not slowed["done"] and any(call[0] is raw(rt).scripts.apply for call in batch):
            slowed["done"] = True
            await asyncio.sleep(1)  # the step's 0.2 s timeout fires during this write
        return await original(batch)

    batcher._pipeline = slow_once  # type: ignore[method-assign]
    run_id = await rt.start(slow_write_wf)
    await worker.drain()
    # The interrupted write left nothing half-known: the hook exists and can be answered.
    [pending] = await rt.list_hooks()
    assert await rt.resume_hook(pending.token, "after") is True
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "after"
    assert calls["created"] >= 1


gate: dict[str, asyncio.Event] = {}


@step
async def long_side_effect() -> str:
    gate["entered"].set()
    try:
        await gate["done"].wait()  # only a cancel ends it early (the test sets it at its end)
    except asyncio.CancelledError:
        calls["stopped"] += 1
        raise
    return "finished"


@workflow(name="cancel_stops_side_effects")
async def cancel_stops_side_effects() -> str:
    return await long_side_effect()


async def test_cancel_stops_a_running_step_at_the_next_heartbeat(
    backend_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    gate["entered"] = asyncio.Event()
    gate["done"] = asyncio.Event()
    async with Runtime(backend_url, partitions=2, lease_seconds=0.3) as rt:
        worker = Worker(rt)
        run_id = await rt.start(cancel_stops_side_effects)
        async with running(worker):
            try:
                await asyncio.wait_for(gate["entered"].wait(), 5)
                await rt.cancel(run_id)
                deadline = time.monotonic() + 5
                while "lease_lost: stopping the execution" not in caplog.text:
                    assert time.monotonic() < deadline, "the heartbeat never saw the cancel"
                    await asyncio.sleep(0.01)
                # The heartbeat cancels the execution as it logs: the step's handler runs
                # on the loop's next iterations, not at some later time.
                for _ in range(10):
                    if calls["stopped"]:
                        break
                    await asyncio.sleep(0)
                assert calls["stopped"] == 1, "the cancelled step kept running"
            finally:
                gate["done"].set()
        assert (await rt.get_run(run_id)).status is RunStatus.CANCELLED
        assert "step.completed" not in [e.type for e in await rt.events(run_id)]


@workflow(name="routed_wf")
async def routed_wf() -> str:
    return "ran"


async def test_a_worker_hands_back_tasks_of_workflows_it_does_not_run(rt: Runtime) -> None:
    # e.g. a rolling deploy: only some workers know a new workflow. The others must not
    # take its lease or sit on its task until the visibility timeout.
    other_pool = Worker(rt, workflows={"something_else"}, hand_back_delay=0.01)
    run_id = await rt.start(routed_wf)
    async with running(other_pool):
        deadline = time.monotonic() + 5
        while other_pool.handed_back < 2:
            assert time.monotonic() < deadline, "the task was not handed back"
            await asyncio.sleep(0.01)
        run = await raw(rt).client.hmget(raw(rt).run_keys(run_id).run, "status", "fence")
        assert run == [b"pending", b"0"]  # never claimed
        # The default lease is 30 s: this must not wait for it. Its reads block 50 ms at a
        # time: the embedded store (fakeredis) wakes blocked reads in the order of a set,
        # not first come first served as Redis does, and the other pool's fresh read kept
        # winning every hand-back for as long as one long blocked read lasted (over 5 s
        # once, under load); a read issued while the task is in the stream takes it.
        capable = Worker(rt, block_seconds=0.05)
        async with running(capable):
            assert await rt.wait(run_id, timeout=10) == "ran"


async def test_a_task_that_does_not_name_its_workflow_is_handed_back_once_claimed(
    rt: Runtime,
) -> None:
    """A task queued by a release before tasks named their workflow: the worker learns the
    workflow from the claim. One that does not run it gives back the lease and the version
    its first claim recorded, and hands the task back naming the workflow. (It ran the run
    regardless of its ``workflows``, recording its own version.)"""
    run_id = await rt.start(routed_wf)
    await as_queued_without_workflows(rt)
    other_pool = Worker(rt, workflows={"something_else"}, version="v1", hand_back_delay=0.01)
    async with running(other_pool):
        deadline = time.monotonic() + 5
        while other_pool.handed_back < 1:
            assert time.monotonic() < deadline, "the task was not handed back"
            assert (await rt.get_run(run_id)).status is not RunStatus.COMPLETED, "it ran"
            await asyncio.sleep(0.01)
        info = await rt.get_run(run_id)
        assert (info.status, info.version) == (RunStatus.PENDING, None)
        # Its lease given back: a worker that runs it need not wait for the 30 s lease.
        capable = Worker(rt, version="v2", block_seconds=0.05)
        async with running(capable):
            assert await rt.wait(run_id, timeout=10) == "ran"
    assert (await rt.get_run(run_id)).version == "v2"


in_flight = {"now": 0, "max": 0}


@step
async def occupies_a_slot() -> None:
    in_flight["now"] += 1
    in_flight["max"] = max(in_flight["max"], in_flight["now"])
    await asyncio.sleep(0.01)
    in_flight["now"] -= 1


@workflow(name="slot_wf")
async def slot_wf() -> None:
    await occupies_a_slot()


async def test_a_worker_runs_at_most_concurrency_executions(rt: Runtime) -> None:
    # XREADGROUP's COUNT is per stream: reading all partitions at once must not admit
    # partitions x concurrency executions.
    in_flight.update(now=0, max=0)
    run_ids = [await rt.start(slot_wf) for _ in range(40)]
    worker = Worker(rt, concurrency=2)
    async with running(worker):
        for run_id in run_ids:
            await rt.wait(run_id, timeout=10)
    assert in_flight["max"] == 2


held: dict[str, asyncio.Event] = {}


@step
async def held_step() -> str:
    calls["held"] += 1
    if calls["held"] == 1:
        held["entered"].set()
        await held["release"].wait()  # the first execution stalls here (a paused process)
        return "first"
    return "second"


@workflow(name="held_wf")
async def held_wf() -> str:
    return await held_step()


def _held() -> None:
    held["entered"] = asyncio.Event()
    held["release"] = asyncio.Event()


async def test_a_write_after_the_run_was_cancelled_is_refused(
    rt: Runtime, worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    # A drain runs no heartbeat: only the fence can refuse the late write.
    _held()
    run_id = await rt.start(held_wf)
    drain = asyncio.create_task(worker.drain())
    await asyncio.wait_for(held["entered"].wait(), 5)
    await rt.cancel(run_id)
    held["release"].set()  # the step returns and its execution tries to record it
    await asyncio.wait_for(drain, 5)
    assert (await rt.get_run(run_id)).status is RunStatus.CANCELLED
    types = [e.type for e in await rt.events(run_id)]
    assert "step.completed" not in types and types[-1] == "workflow.cancelled", types
    assert "lease_lost" in caplog.text


async def test_a_worker_that_lost_its_lease_cannot_write(
    backend_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The zombie of test_worker_processes in one process: its execution stalls past its
    # lease (no heartbeat: a drain runs none), another worker takes the run over and
    # finishes it, then the stalled execution tries to record its step.
    _held()
    async with Runtime(backend_url, partitions=2, lease_seconds=0.05) as rt:
        zombie = Worker(rt)
        run_id = await rt.start(held_wf)
        stalled = asyncio.create_task(zombie.drain())
        await asyncio.wait_for(held["entered"].wait(), 5)
        rescuer = Worker(rt, visibility_timeout=0)
        deadline = time.monotonic() + 5
        while (await rt.get_run(run_id)).status is not RunStatus.COMPLETED:
            assert time.monotonic() < deadline, "the rescuer never took the run over"
            await rescuer.reclaim()  # takes the task; its claim waits for the lease to lapse
            await rescuer.drain()
            await asyncio.sleep(0.01)
        assert await rt.wait(run_id, timeout=5) == "second"
        held["release"].set()
        await asyncio.wait_for(stalled, 5)
        events = await rt.events(run_id)
        assert [e.data["result"] for e in events if e.type == "step.completed"] == ["second"]
        assert [e.type for e in events].count("workflow.completed") == 1
        assert "lease_lost" in caplog.text

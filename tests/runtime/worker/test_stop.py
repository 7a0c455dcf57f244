"""A worker that stops gives back what it read and did not run (runtime/worker/worker.py,
lua/give_back.lua): the tasks in its backlog go to the other workers at once, instead of
waiting in its consumer's pending list for the visibility timeout (and their runs with
them: a run's later answers queue no task while it has one)."""

from __future__ import annotations

import asyncio
import time

from runtime import RunStatus, Runtime, Worker, step, workflow
from runtime.store.redis._keys import partition_of
from tests.raw_redis import raw, task_consumers

entered: list[int] = []
gate: dict[str, asyncio.Event] = {}  # the test's event, made in its own loop


@step
async def held(n: int) -> int:
    entered.append(n)
    await gate["open"].wait()
    return n


@workflow(name="stop_held")
async def stop_held(n: int) -> int:
    return await held(n)


def _one_run_per_partition(partitions: int) -> list[str]:
    """Run ids, one in each partition: a read (one task per partition at most, with one
    slot free) delivers them all, and the worker keeps all but one in its backlog."""
    ids: dict[int, str] = {}
    n = 0
    while len(ids) < partitions:
        run_id = f"r-stop-{n}"
        ids.setdefault(partition_of(run_id, partitions), run_id)
        n += 1
    return list(ids.values())


async def test_the_backlog_of_a_stopping_worker_goes_to_the_other_workers(rt: Runtime) -> None:
    entered.clear()
    gate["open"] = asyncio.Event()
    partitions = raw(rt).partitions
    run_ids = _one_run_per_partition(partitions)
    for n, run_id in enumerate(run_ids):
        await rt.start(stop_held, n, run_id=run_id)
    stopping = Worker(rt, concurrency=1, timer_tick=0.01)
    working = asyncio.create_task(stopping.run())
    deadline = time.monotonic() + 10
    while not entered:
        assert time.monotonic() < deadline, "the first run's step did not start"
        await asyncio.sleep(0.01)
    assert len(stopping.tasks._backlog) == partitions - 1  # the others, read, wait for a slot
    stopping.stop()
    await asyncio.sleep(0.05)
    gate["open"].set()  # the execution in flight ends: a graceful stop waits for it
    await asyncio.wait_for(working, 10)
    assert stopping.consumer not in await task_consumers(raw(rt))  # what it held went back

    began = time.monotonic()
    await Worker(rt, timer_tick=0.01).drain()  # another worker, at once
    statuses = [(await rt.get_run(run_id)).status for run_id in run_ids]
    assert statuses == [RunStatus.COMPLETED] * partitions, statuses
    assert time.monotonic() - began < 5  # not after a visibility timeout
    assert sorted(entered) == list(range(partitions))  # each run's step ran once


async def test_a_stopped_worker_leaves_the_task_groups(rt: Runtime) -> None:
    """Its consumer (a name of its own, one per process) would otherwise stay listed in
    every partition's group for ever, one more after every deploy."""
    store = raw(rt)
    await rt.start(stop_held, 0, run_id="r-stop-leaves")
    entered.clear()
    gate["open"] = asyncio.Event()
    gate["open"].set()
    worker = Worker(rt, timer_tick=0.01)
    await worker.drain()
    assert worker.consumer in await task_consumers(store)  # it read, so it is listed
    working = asyncio.create_task(worker.run())
    await asyncio.sleep(0.05)
    worker.stop()
    await asyncio.wait_for(working, 10)
    assert worker.consumer not in await task_consumers(store)
    assert (await rt.get_run("r-stop-leaves")).status is RunStatus.COMPLETED

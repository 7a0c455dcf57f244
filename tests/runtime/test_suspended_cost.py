"""A suspended run costs Redis bytes only: no worker task, no thread."""

from __future__ import annotations

import asyncio
import threading
import time

from runtime import RunStatus, Runtime, Worker, step, step_hook, workflow
from tests.helpers import running


@step
async def waits_for_visitor() -> object:
    return await step_hook("visitor")


@workflow(name="many_waiting")
async def many_waiting() -> object:
    return await waits_for_visitor()


async def test_thousand_suspended_runs_hold_no_task_or_thread(redis_url: str) -> None:
    async with Runtime(redis_url, partitions=4) as rt:
        worker = Worker(rt, concurrency=64)
        async with running(worker):
            await worker.ready.wait()
            # redis-py (from 8.2) packs a pipeline of 1,000 commands or more in the loop's
            # default executor, as this test's own list_hooks of 1,000 hooks does: that pool's
            # one reused thread is started before the baseline, so only a thread the worker
            # kept for a run would be counted.
            await asyncio.to_thread(lambda: None)
            idle_tasks = len(asyncio.all_tasks())
            idle_threads = threading.active_count()
            run_ids = await asyncio.gather(*(rt.start(many_waiting) for _ in range(1000)))
            deadline = time.monotonic() + 60
            while len(await rt.list_hooks()) < 1000:
                assert time.monotonic() < deadline, "runs did not all suspend"
                await asyncio.sleep(0.05)
            while worker.running:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            # (a pipelined round trip of the background loops may be in flight for a moment;
            # a task held per suspended run would never go)
            while len(asyncio.all_tasks()) > idle_tasks:
                assert time.monotonic() < deadline, [t.get_coro() for t in asyncio.all_tasks()]
                await asyncio.sleep(0.01)
            assert threading.active_count() <= idle_threads, [t.name for t in threading.enumerate()]
            statuses = {(await rt.get_run(r)).status for r in run_ids[:50]}
            assert statuses == {RunStatus.SUSPENDED}

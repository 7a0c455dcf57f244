"""Parallel step_hooks with real `parley worker` processes: a worker SIGKILLed between the
answers changes nothing."""

from __future__ import annotations

import asyncio
import time

import pytest

from runtime import RunStatus, Runtime
from tests.processes import WorkerProcess

pytestmark = pytest.mark.e2e
APP = "tests.apps.composition_app"


async def until(rt: Runtime, run_id: str, check: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while True:
        events = [e.type for e in await rt.events(run_id)]
        if check == "two suspended" and events.count("step.suspended") == 2:
            return
        one_done = check == "one step done" and events.count("step.completed") == 1
        if one_done and (await rt.get_run(run_id)).status is RunStatus.SUSPENDED:
            return
        assert time.monotonic() < deadline, f"never {check}: {events}"
        await asyncio.sleep(0.02)


async def test_a_worker_killed_between_the_answers_changes_nothing(
    prt: Runtime, redis_url: str, workers: list[WorkerProcess]
) -> None:
    first = WorkerProcess(redis_url, APP)
    workers.append(first)
    run_id = await prt.start("parallel_asks_proc")
    await until(prt, run_id, "two suspended")  # one suspension per step_hook
    hooks = {h.name: h.token for h in await prt.list_hooks(run_id=run_id)}
    assert sorted(hooks) == ["finance", "legal"]
    await prt.resume_hook(hooks["legal"], "L")
    await until(prt, run_id, "one step done")
    first.kill()  # SIGKILL between the answers
    second = WorkerProcess(redis_url, APP)
    workers.append(second)
    await prt.resume_hook(hooks["finance"], "F")
    assert await prt.wait(run_id, timeout=15) == ["L", "F"]
    types = [e.type for e in await prt.events(run_id)]
    assert types.count("hook.created") == 2 and types.count("hook.received") == 2
    assert types.count("step.completed") == 2 and types.count("workflow.completed") == 1

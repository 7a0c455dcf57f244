"""Crash, zombie and sharing tests with real `parley worker` processes and real Redis."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from runtime import Event, RunStatus, Runtime
from runtime.store.redis import keys as redis_keys
from tests.processes import PARTITIONS, WorkerProcess, wait_until

pytestmark = pytest.mark.e2e
APP = "tests.apps.hitl_app"


async def _until_status(rt: Runtime, run_id: str, status: RunStatus, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while (await rt.get_run(run_id)).status is not status:
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} never became {status.value}")
        await asyncio.sleep(0.02)


def _event_types(rt_events: list[Event]) -> list[str]:
    return [e.type for e in rt_events]


async def test_durable_timeout_fires_after_the_creating_worker_died(
    prt: Runtime, redis_url: str, workers: list[WorkerProcess]
) -> None:
    first = WorkerProcess(redis_url, APP)
    workers.append(first)
    run_id = await prt.start("hitl", timeout=1.0)
    await _until_status(prt, run_id, RunStatus.SUSPENDED)
    first.kill()  # the deadline lives in Redis, not in this process
    workers.append(WorkerProcess(redis_url, APP))
    assert await prt.wait(run_id, timeout=15) == "timed out"
    events = await prt.events(run_id)
    created = next(e for e in events if e.type == "hook.created")
    expired = next(e for e in events if e.type == "hook.expired")
    assert expired.timestamp_ms >= created.data["expires_at"]  # never early


@pytest.mark.parametrize(
    ("crash_at", "on_created_calls"),
    [("after_hook_created", 1), ("after_on_created", 2)],
)
async def test_crash_after_hook_created_does_not_duplicate_it(
    prt: Runtime,
    redis_url: str,
    sync_redis: redis.Redis,
    workers: list[WorkerProcess],
    crash_at: str,
    on_created_calls: int,
) -> None:
    session = Runtime.new_session_id()
    doomed = WorkerProcess(redis_url, APP, crash_at=crash_at)
    workers.append(doomed)
    run_id = await prt.start("hitl", session=session)
    assert doomed.wait_exit() == -9  # died exactly at the crash point
    workers.append(WorkerProcess(redis_url, APP))  # reclaims after the visibility timeout
    await _until_status(prt, run_id, RunStatus.SUSPENDED)

    created = sync_redis.lrange(f"test:created:{run_id}", 0, -1)
    assert len(created) == on_created_calls  # at-least-once across a crash
    [hook_info] = await prt.list_hooks(run_id=run_id)
    assert await prt.resume_hook(hook_info.token, "yes")
    assert await prt.wait(run_id, timeout=15) == {"answer": "yes", "setup": {"setup": "done"}}

    types = _event_types(await prt.events(run_id))
    assert types.count("hook.created") == 1
    assert types.count("step.suspended") == 1
    assert sync_redis.get(f"test:setup:{run_id}") == b"1"
    assert sync_redis.get(f"test:applied:{run_id}") == b"1"
    prompts = [m for _, m in await prt.read_outbox(session) if m["type"] == "prompt"]
    assert len(prompts) == 1  # the visitor was prompted once
    keys = redis_keys.run_keys(run_id, PARTITIONS)
    assert sync_redis.xpending(keys.tasks, "workers")["pending"] == 0
    assert sync_redis.exists(keys.ckpt) == 0
    assert sync_redis.zcard(keys.deadlines) == 0


async def test_crash_between_two_rounds(
    prt: Runtime, redis_url: str, sync_redis: redis.Redis, workers: list[WorkerProcess]
) -> None:
    doomed = WorkerProcess(redis_url, APP, crash_at="after_hook_created@2")
    workers.append(doomed)
    run_id = await prt.start("two_rounds")
    await _until_status(prt, run_id, RunStatus.SUSPENDED)
    [first] = await prt.list_hooks(run_id=run_id)
    await prt.resume_hook(first.token, "a")
    assert doomed.wait_exit() == -9  # died creating the second round's hook
    workers.append(WorkerProcess(redis_url, APP))
    await _until_status(prt, run_id, RunStatus.SUSPENDED)
    [second] = await prt.list_hooks(run_id=run_id)
    assert second.token != first.token
    await prt.resume_hook(second.token, "b")
    assert await prt.wait(run_id, timeout=15) == ["a", "b"]
    types = _event_types(await prt.events(run_id))
    assert types.count("hook.created") == 2
    assert types.count("step.suspended") == 2  # exactly one per round


async def test_fast_answer_from_on_created_multi_process(
    prt: Runtime, redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers.append(WorkerProcess(redis_url, APP))
    workers.append(WorkerProcess(redis_url, APP))
    run_ids = [await prt.start("fast_answer") for _ in range(20)]
    for run_id in run_ids:
        assert await prt.wait(run_id, timeout=15) == "fast"


async def test_three_workers_share_runs_and_survive_a_kill(
    prt: Runtime, redis_url: str, sync_redis: redis.Redis, workers: list[WorkerProcess]
) -> None:
    concurrency = 8
    for _ in range(3):
        # lease 3 s: under a loaded CI a live worker must not look dead (a 1 s lease can
        # lapse while its loop is starved, and then a step legitimately runs twice)
        workers.append(WorkerProcess(redis_url, APP, concurrency=concurrency, lease=3.0))
    run_ids = [await prt.start("batch", n) for n in range(300)]

    def completed() -> int:
        return sum(1 for k in sync_redis.scan_iter("test:exec:*", count=1000))

    wait_until(lambda: completed() >= 60, 30, "60 runs to execute")
    workers[1].kill()
    results = [await prt.wait(run_id, timeout=30) for run_id in run_ids]
    assert results == [n * 2 for n in range(300)]
    executions = [int(sync_redis.get(f"test:exec:{r}") or 0) for r in run_ids]
    assert all(e >= 1 for e in executions)
    # Only runs the killed worker was executing may have run their step twice — plus, on
    # a starved machine, runs whose live worker let its lease lapse: each such one is
    # refused at its next write and logged as lease_lost, so it is counted here.
    logs = "\n".join(w.log() for w in workers if w.proc.poll() is None)
    lapsed = logs.count("lease_lost")
    assert sum(e - 1 for e in executions) <= concurrency + lapsed, logs[-6000:]
    for run_id in run_ids:
        types = _event_types(await prt.events(run_id))
        assert types.count("workflow.completed") == 1
    for p in range(PARTITIONS):
        assert sync_redis.xpending(f"parley:{{p:{p}}}:tasks", "workers")["pending"] == 0


async def test_zombie_worker_cannot_append(
    prt: Runtime, redis_url: str, sync_redis: redis.Redis, workers: list[WorkerProcess]
) -> None:
    zombie = WorkerProcess(redis_url, APP)
    workers.append(zombie)
    run_id = await prt.start("zombie")
    wait_until(lambda: sync_redis.get("test:zombie:entered") is not None, 15, "the slow step")
    zombie.pause()  # past its lease: no heartbeat, its task is reclaimed
    rescuer = WorkerProcess(redis_url, APP)
    workers.append(rescuer)
    assert await prt.wait(run_id, timeout=15) == rescuer.pid
    zombie.resume()  # wakes up: its step returns and tries to record it, or its
    # heartbeat finds the lease lost first and stops the step
    wait_until(
        lambda: sync_redis.get("test:zombie:ended") is not None, 15, "the zombie's step to end"
    )
    ended = sync_redis.get("test:zombie:ended")
    assert ended in (f"returned {zombie.pid}".encode(), f"stopped {zombie.pid}".encode())
    # A graceful stop waits for every execution in flight: once the zombie has exited,
    # whatever write its step led to has been sent and answered.
    zombie.proc.terminate()
    assert zombie.wait_exit() == 0
    log = zombie.log()

    events = await prt.events(run_id)
    writers = [e.data["result"] for e in events if e.type == "step.completed"]
    assert writers == [rescuer.pid], (ended, log[-3000:])  # nothing from the zombie
    types = _event_types(events)
    assert types.count("workflow.completed") == 1
    assert types[-1] == "workflow.completed"
    # it was refused (its write) or stopped (by its heartbeat), and said so
    assert "lease_lost" in log, log[-3000:]


async def test_long_step_is_not_stolen_while_its_worker_lives(
    prt: Runtime, redis_url: str, sync_redis: redis.Redis, workers: list[WorkerProcess]
) -> None:
    owner = WorkerProcess(redis_url, APP)  # lease (visibility) 1 s; the step takes 2.5 s
    workers.append(owner)
    run_id = await prt.start("long_step")
    wait_until(lambda: sync_redis.get(f"test:long:{run_id}") is not None, 15, "the step")
    workers.append(WorkerProcess(redis_url, APP))  # would reclaim an idle task
    assert await prt.wait(run_id, timeout=15) == owner.pid
    assert sync_redis.get(f"test:long:{run_id}") == b"1"  # executed once, never stolen

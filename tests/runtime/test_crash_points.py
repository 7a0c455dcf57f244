"""The crash suite: a real worker process dies (SIGKILL) at each named point of a HITL
run; a fresh worker finishes it, and every invariant holds."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from runtime import RunStatus, Runtime
from runtime.store.redis import keys as redis_keys
from runtime.testing import CRASH_POINTS as POINTS
from tests.processes import PARTITIONS, WorkerProcess

pytestmark = pytest.mark.e2e
APP = "tests.apps.hitl_app"

# Points reached during the first execution (start → suspend) vs. the resume.
FIRST_EXECUTION = [
    "after_step_start",
    "after_checkpoint_save",
    "after_hook_created",
    "after_on_created",
]
RESUME = ["before_step_reexecute", "after_step_completed", "after_final_event"]


# Points of other lifecycles, covered by their own tests.
ELSEWHERE = {"after_child_started": "tests/runtime/test_children_processes.py"}


def test_every_crash_point_is_covered() -> None:
    assert set(FIRST_EXECUTION + RESUME) | set(ELSEWHERE) == POINTS


async def _wait_for(rt: Runtime, run_id: str, doomed: WorkerProcess) -> bool:
    """Wait until the run suspends or the doomed worker dies; True if it died."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if doomed.proc.poll() is not None:
            return True
        if (await rt.get_run(run_id)).status is RunStatus.SUSPENDED:
            return False
        await asyncio.sleep(0.02)
    raise AssertionError("neither suspended nor crashed")


async def _until_suspended(rt: Runtime, run_id: str) -> None:
    deadline = time.monotonic() + 20
    while (await rt.get_run(run_id)).status is not RunStatus.SUSPENDED:
        assert time.monotonic() < deadline, "run never suspended"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("point", FIRST_EXECUTION + RESUME)
async def test_crash_at(point: str, prt: Runtime, redis_url: str, sync_redis: redis.Redis) -> None:
    session = Runtime.new_session_id()
    doomed = WorkerProcess(redis_url, APP, crash_at=point)
    rescuer: WorkerProcess | None = None
    try:
        run_id = await prt.start("hitl", session=session)
        answered = False
        if not await _wait_for(prt, run_id, doomed):
            assert point in RESUME
            [pending] = await prt.list_hooks(run_id=run_id)
            assert await prt.resume_hook(pending.token, "yes")
            answered = True
            assert doomed.wait_exit() == -9
        else:
            assert point in FIRST_EXECUTION
            assert doomed.proc.returncode == -9
        rescuer = WorkerProcess(redis_url, APP)
        if not answered:
            await _until_suspended(prt, run_id)
            [pending] = await prt.list_hooks(run_id=run_id)
            assert await prt.resume_hook(pending.token, "yes")
        result = await prt.wait(run_id, timeout=20)
    finally:
        doomed.stop()
        if rescuer is not None:
            rescuer.stop()

    # the run completes exactly once with the right result
    assert result == {"answer": "yes", "setup": {"setup": "done"}}
    types = [e.type for e in await prt.events(run_id)]
    assert types.count("workflow.completed") == 1
    # setup ran once; hook.created once; the answer recorded once
    assert sync_redis.get(f"test:setup:{run_id}") == b"1"
    assert types.count("hook.created") == 1
    assert types.count("hook.received") == 1
    # the post-answer part of the step body ran once — except when the crash hit after
    # it returned and before its result was durable: step bodies are at-least-once
    applied = int(sync_redis.get(f"test:applied:{run_id}") or 0)
    assert applied == (2 if point == "after_step_completed" else 1)
    # on_created once — twice only after a crash between its return and the suspension
    # (the rescuer cannot know it ran: at-least-once); the visitor-facing prompt once
    created = sync_redis.llen(f"test:created:{run_id}")
    assert created == (2 if point == "after_on_created" else 1)
    outbox = await prt.read_outbox(session)
    assert [m["type"] for _, m in outbox].count("prompt") == 1
    # nothing left behind: no pending task, no deadline, no checkpoint
    keys = redis_keys.run_keys(run_id, PARTITIONS)
    assert sync_redis.xpending(keys.tasks, "workers")["pending"] == 0
    assert sync_redis.zcard(keys.deadlines) == 0
    assert sync_redis.exists(keys.ckpt) == 0
    assert await prt.list_hooks() == []

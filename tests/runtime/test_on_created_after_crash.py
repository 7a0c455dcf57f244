"""``on_created`` after a crash: a worker process is SIGKILLed right after it recorded a
hook (``after_hook_created``), before its ``on_created`` ran, and the hook's timeout is
shorter than the lease — so the hook's deadline passes before any worker can execute the
step again. The person is still asked (README, "The step_hook contract"): the hook does not
expire before its ``on_created`` returned once, and the re-execution that asks gives it a
fresh deadline, ``timeout`` from then."""

from __future__ import annotations

import asyncio

import pytest
import redis

from runtime import RunStatus, Runtime
from runtime.store.redis import keys as redis_keys
from tests.processes import PARTITIONS, WorkerProcess, wait_until

pytestmark = pytest.mark.e2e
APP = "tests.apps.outage_app"
HOOKS = 5
TIMEOUT = 1.0  # the hook's
LEASE = 4.0  # the workers': longer than the hook's timeout


def _asked(sync_redis: redis.Redis, run_id: str) -> list[tuple[str, int, int]]:
    """Each time on_created ran: the token, when (ms), the hook's deadline then (ms)."""
    entries = [e.decode().split("@") for e in sync_redis.lrange(f"test:asked:{run_id}", 0, -1)]
    return [(token, int(at), int(deadline)) for token, at, deadline in entries]


async def _crash_after_hook_created(prt: Runtime, redis_url: str, timeout: float) -> str:
    """One run whose worker dies right after recording its hook; returns its id."""
    doomed = WorkerProcess(redis_url, APP, crash_at="after_hook_created", lease=LEASE)
    try:
        run_id = await prt.start("ask_briefly", timeout)
        assert doomed.wait_exit() == -9  # died exactly there
    finally:
        doomed.stop()
    [hook] = await prt.list_hooks(run_id=run_id)  # recorded; nobody asked yet
    assert hook.expires_at is not None
    return run_id


async def test_on_created_runs_for_every_hook_whose_worker_died_before_asking(
    prt: Runtime, redis_url: str, sync_redis: redis.Redis, workers: list[WorkerProcess]
) -> None:
    run_ids = [await _crash_after_hook_created(prt, redis_url, TIMEOUT) for _ in range(HOOKS)]
    assert not any(_asked(sync_redis, run_id) for run_id in run_ids)
    await asyncio.sleep(TIMEOUT + 0.5)  # every hook's deadline has passed

    workers.append(WorkerProcess(redis_url, APP, lease=LEASE))  # fires due deadlines at once
    for run_id in run_ids:
        assert await prt.wait(run_id, timeout=30) == "timed out"
    asked = [run_id for run_id in run_ids if _asked(sync_redis, run_id)]
    print(f"on_created ran for {len(asked)} of {HOOKS} hooks")
    assert len(asked) == HOOKS
    for run_id in run_ids:
        events = await prt.events(run_id)
        types = [e.type for e in events]
        assert types.count("hook.created") == 1
        assert types.count("hook.expired") == 1
        assert types.count("workflow.completed") == 1
        # asked once, with a deadline still ahead (the first one had passed), and the
        # hook expired only after that deadline
        [(_token, asked_ms, deadline_ms)] = _asked(sync_redis, run_id)
        created = next(e for e in events if e.type == "hook.created")
        assert created.data["expires_at"] < asked_ms < deadline_ms
        [expired] = [e for e in events if e.type == "hook.expired"]
        assert expired.timestamp_ms >= deadline_ms
        print(
            f"{run_id}: asked {asked_ms - created.data['expires_at']} ms after its first "
            f"deadline, with {deadline_ms - asked_ms} ms left; expired "
            f"{expired.timestamp_ms - asked_ms} ms after the asking"
        )
    keys = redis_keys.run_keys(run_ids[0], PARTITIONS)
    assert sync_redis.zcard(keys.deadlines) == 0
    assert await prt.list_hooks() == []


async def test_the_person_asked_after_a_crash_can_still_answer(
    prt: Runtime, redis_url: str, sync_redis: redis.Redis, workers: list[WorkerProcess]
) -> None:
    timeout = 3.0  # still shorter than the lease; long enough to answer in
    run_id = await _crash_after_hook_created(prt, redis_url, timeout)
    await asyncio.sleep(timeout + 0.5)  # its first deadline has passed
    workers.append(WorkerProcess(redis_url, APP, lease=LEASE))
    wait_until(lambda: bool(_asked(sync_redis, run_id)), 30, "the person to be asked")
    [(token, asked_ms, deadline_ms)] = _asked(sync_redis, run_id)
    [hook] = await prt.list_hooks(run_id=run_id)
    assert hook.token == token
    assert hook.expires_at is not None and int(hook.expires_at * 1000) == deadline_ms
    assert deadline_ms > asked_ms  # the deadline it shows is ahead
    print(f"asked with {deadline_ms - asked_ms} ms left to answer (timeout {timeout} s)")
    assert await prt.resume_hook(token, "yes")
    assert await prt.wait(run_id, timeout=30) == {"answer": "yes"}
    info = await prt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED
    assert [e.type for e in await prt.events(run_id)].count("hook.received") == 1

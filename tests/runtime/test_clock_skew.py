"""One clock: leases and deadlines are decided on Redis' clock, so a worker whose machine's
clock is 30 s ahead or behind neither expires a hook early or late nor takes a live lease.

The skew is real: the worker process runs under libfaketime (``faketime``, installed by
``scripts/test``), so every clock call of that process, Python's and C's, is shifted.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
import redis

from runtime import RunStatus, Runtime
from runtime.store.redis import keys as redis_keys
from tests.processes import PARTITIONS, WorkerProcess, wait_until

pytestmark = pytest.mark.e2e

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
SKEWS = ["+30s", "-30s"]
HITL = "tests.apps.hitl_app"
CLOCK = "tests.apps.clock_app"


def skewed_env(skew: str) -> dict[str, str]:
    if not os.path.exists(LIBFAKETIME):
        pytest.fail(f"libfaketime is not installed at {LIBFAKETIME} (apt-get install faketime)")
    return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": skew, "FAKETIME_NO_CACHE": "1"}


def test_the_skew_is_real() -> None:
    """The premise: under libfaketime a process's wall clock is 30 s off."""
    import subprocess
    import sys

    for skew, sign in (("+30s", 1), ("-30s", -1)):
        out = subprocess.run(
            [sys.executable, "-c", "import time; print(time.time())"],
            env={**os.environ, **skewed_env(skew)},
            capture_output=True,
            text=True,
            check=True,
        )
        assert abs(float(out.stdout) - time.time() - sign * 30) < 5


async def _until(rt: Runtime, run_ids: list[str], status: RunStatus, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        statuses = [(await rt.get_run(r)).status for r in run_ids]
        if all(s is status for s in statuses):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"runs not all {status.value} after {timeout}s: {statuses}")
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("skew", SKEWS)
async def test_a_skewed_worker_fires_deadlines_on_the_store_clock(
    prt: Runtime, redis_url: str, workers: list[WorkerProcess], skew: str
) -> None:
    # Hooks created by a correct worker; then only the skewed worker is left to fire them.
    correct = WorkerProcess(redis_url, HITL)
    workers.append(correct)
    run_ids = [await prt.start("hitl", timeout=4.0) for _ in range(4)]
    await _until(prt, run_ids, RunStatus.SUSPENDED, 15)
    correct.stop()
    skewed = WorkerProcess(redis_url, HITL, extra_env=skewed_env(skew))
    workers.append(skewed)
    # A run the skewed worker executes itself: its hook's deadline is also Redis' clock's.
    run_ids.append(await prt.start("hitl", timeout=4.0))
    for run_id in run_ids:
        assert await prt.wait(run_id, timeout=15) == "timed out"
        events = await prt.events(run_id)
        started = next(e for e in events if e.type == "workflow.started")
        created = next(e for e in events if e.type == "hook.created")
        expired = next(e for e in events if e.type == "hook.expired")
        expires_at = created.data["expires_at"]
        # the deadline is 4 s after the hook was recorded, on Redis' clock (event ids)
        assert 3_000 <= expires_at - created.timestamp_ms <= 5_000, (skew, run_id)
        # fired when due: never early, and not a skew late
        assert expires_at <= expired.timestamp_ms <= expires_at + 3_000, (skew, run_id)
        assert expired.timestamp_ms - started.timestamp_ms < 10_000


@pytest.mark.parametrize("skew", SKEWS)
async def test_a_skewed_clock_takes_no_live_lease(
    prt: Runtime,
    redis_url: str,
    sync_redis: redis.Redis,
    workers: list[WorkerProcess],
    skew: str,
) -> None:
    # A worker ahead would see every lease as expired; a worker behind writes leases that
    # look expired to everyone else. Either way a second worker handed the run's task
    # while the first still executes it must find the run busy.
    ahead = skew.startswith("+")
    holder_env = {} if ahead else skewed_env(skew)
    other_env = skewed_env(skew) if ahead else {}
    # concurrency 1: busy with the step, the holder reads no more tasks
    holder = WorkerProcess(redis_url, CLOCK, concurrency=1, extra_env=holder_env)
    workers.append(holder)
    run_id = await prt.start("clock_slow", 5.0)
    wait_until(lambda: sync_redis.get(f"test:slow:{run_id}") == b"1", 10, "the step to start")
    other = WorkerProcess(redis_url, CLOCK, extra_env=other_env)
    workers.append(other)
    # the run's task delivered again (as a retried answer or a reclaim would)
    partition = redis_keys.partition_of(run_id, PARTITIONS)
    sync_redis.xadd(redis_keys.key("tasks", partition), {"r": run_id, "w": "clock_slow"})
    assert await prt.wait(run_id, timeout=20) == "done"
    assert sync_redis.get(f"test:slow:{run_id}") == b"1"  # the step ran once
    assert "lease_lost" not in holder.log()

"""Every write or read a step makes rides out a Redis outage the way the engine's own
writes do: redis-server is SIGKILLed and restarted on the same AOF (~1 s down) while runs
emit, post to their session, save checkpoints or inspect runs in a loop, in a real worker
process. The execution is abandoned (nothing recorded) and the run is executed again after
the outage: every run completes exactly once and no step failure is recorded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from runtime import RunStatus, Runtime
from tests.processes import PARTITIONS, WorkerProcess
from tests.redis_servers import RedisServer

pytestmark = pytest.mark.e2e
APP = "tests.apps.outage_app"
RUNS = 10
OUTAGE_SECONDS = 1.0


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    server = RedisServer("--appendonly", "yes", "--appendfsync", "always")
    yield server
    server.stop()


async def _start_runs(rt: Runtime, workflow: str, *args: str) -> list[str]:
    return [await rt.start(workflow, *args, session=Runtime.new_session_id()) for _ in range(RUNS)]


async def _until_all_running(rt: Runtime, run_ids: list[str]) -> None:
    deadline = time.monotonic() + 20
    for run_id in run_ids:
        while (await rt.get_run(run_id)).status is not RunStatus.RUNNING:
            assert time.monotonic() < deadline, f"{run_id} never ran"
            await asyncio.sleep(0.02)


async def _restart_under(
    aof_redis: RedisServer, worker: WorkerProcess, workflow: str, *args: str
) -> None:
    """Start the runs, restart Redis while their loops run, and check the outcome."""
    async with Runtime(aof_redis.url, partitions=PARTITIONS) as rt:
        run_ids = await _start_runs(rt, workflow, *args)
        await _until_all_running(rt, run_ids)
        await asyncio.sleep(0.3)  # well inside the loops (3 s each)
    aof_redis.kill()
    time.sleep(OUTAGE_SECONDS)
    aof_redis.start()  # same port, same AOF files
    async with Runtime(aof_redis.url, partitions=PARTITIONS) as rt:
        for run_id in run_ids:
            info = await rt.get_run(run_id)
            if info.status is RunStatus.FAILED:  # say why, not just "not completed"
                raise AssertionError(f"{run_id} failed: {info.error}")
            assert await rt.wait(run_id, timeout=60) == 60
            types = [e.type for e in await rt.events(run_id)]
            assert types.count("workflow.completed") == 1, types
            assert "step.failed" not in types, types
            assert "workflow.failed" not in types, types
    assert worker.proc.poll() is None
    outages = worker.log().count("store unavailable")
    print(f"{workflow}{list(args)}: {outages} execution(s) abandoned during the outage")
    assert outages > 0  # the outage did hit the loops


@pytest.mark.parametrize("kind", ["emit", "post", "checkpoint", "inspect"])
async def test_a_step_writing_in_a_loop_rides_out_a_redis_restart(
    kind: str, aof_redis: RedisServer
) -> None:
    worker = WorkerProcess(aof_redis.url, APP)
    try:
        await _restart_under(aof_redis, worker, "write_loop", kind)
    finally:
        worker.stop()


async def test_emit_from_the_workflow_body_rides_out_a_redis_restart(
    aof_redis: RedisServer,
) -> None:
    worker = WorkerProcess(aof_redis.url, APP)
    try:
        await _restart_under(aof_redis, worker, "emit_in_body")
    finally:
        worker.stop()

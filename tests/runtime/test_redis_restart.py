"""A Redis *process* crash with AOF on: redis-server is SIGKILLed and restarted on the same
files; every answer that resume_hook acknowledged is applied and every run completes; the
worker reconnects by itself and logs the outage.

What this shows and what it does not: a killed process leaves what it wrote to the AOF in
the OS page cache, so the file is complete whatever ``appendfsync`` says (``always``,
``everysec`` or ``no`` all pass here). Durability across a power loss or an OS crash
depends on the fsync policy and is not tested: a test cannot pull the plug.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from runtime import RunStatus, Runtime
from tests.processes import PARTITIONS, WorkerProcess, wait_until
from tests.redis_servers import RedisServer

pytestmark = pytest.mark.e2e


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    # The recommended setting; see above for why this test cannot tell it from the others.
    server = RedisServer("--appendonly", "yes", "--appendfsync", "always")
    yield server
    server.stop()


async def test_acknowledged_answers_survive_a_redis_process_crash_with_aof(
    aof_redis: RedisServer,
) -> None:
    worker = WorkerProcess(aof_redis.url, "tests.apps.hitl_app")
    try:
        async with Runtime(aof_redis.url, partitions=PARTITIONS) as rt:
            run_ids = [await rt.start("echo") for _ in range(30)]
            deadline = time.monotonic() + 20
            while len(await rt.list_hooks()) < len(run_ids):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            answers = {}
            for i, hook in enumerate(await rt.list_hooks()):
                assert await rt.resume_hook(hook.token, f"answer-{i}")  # acknowledged
                answers[hook.run_id] = f"answer-{i}"
        aof_redis.kill()  # a process crash; some answers are still being applied by the worker
        wait_until(lambda: "(Redis) is unavailable" in worker.log(), 15, "the outage to be logged")
        aof_redis.start()  # same port, same AOF files

        async with Runtime(aof_redis.url, partitions=PARTITIONS) as rt:
            for run_id in run_ids:
                result = await rt.wait(run_id, timeout=30)
                assert result["answer"] == answers[run_id]
                types = [e.type for e in await rt.events(run_id)]
                assert types.count("hook.received") == 1
                assert types.count("workflow.completed") == 1
                assert (await rt.get_run(run_id)).status is RunStatus.COMPLETED
        assert worker.proc.poll() is None  # it rode out the outage
        wait_until(lambda: "reachable again" in worker.log(), 15, "the recovery to be logged")
    finally:
        worker.stop()

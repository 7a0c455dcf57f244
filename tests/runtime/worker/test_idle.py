"""An idle worker is idle: a few Redis commands a second whatever the number of partitions
and workers (counted by the server's MONITOR feed, never timed), and a deadline scheduled
while the deadline loop sleeps towards a later one (or none) still fires, and not early.

Counting: every command a private redis-server executes at top level (alone or pipelined);
the commands that scripts run inside Redis are not round trips and are left out."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
import redis

from runtime import STEP_HOOK_TIMEOUT, RunStatus, Runtime, Worker, step, step_hook, workflow
from runtime.testing import RedisServer
from tests.helpers import running
from tests.monitor import MARK, MonitorFeed
from tests.raw_redis import raw

# The issue's target: an idle worker issues at most this many commands a second.
BUDGET_PER_SECOND = 5
WINDOW = 3.0  # seconds of counting


@step
async def ask(timeout: str) -> Any:
    answer = await step_hook("q", timeout=timeout, on_timeout="return")
    return "timed out" if answer is STEP_HOOK_TIMEOUT else answer


@workflow(name="idle_deadline_wf")
async def idle_deadline_wf(timeout: str) -> Any:
    return await ask(timeout)


class Monitor(MonitorFeed):
    """The top-level commands a private redis-server executes between two marks."""

    def between(self, start: str, end: str, *, lua: bool = False) -> Counter[str]:
        """Ends the feed; the commands between the two marks, by name (``lua``: those
        the scripts ran inside Redis instead)."""
        self.end()
        counted: Counter[str] = Counter()
        inside = False
        for entry in self.entries:
            command = entry["command"]
            if command == f"ECHO {MARK}{start}":
                inside = True
            elif command == f"ECHO {MARK}{end}":
                break
            elif inside and (entry["client_type"] == "lua") == lua:
                counted[command.split(" ")[0].upper()] += 1
        self.close()
        return counted


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    started = RedisServer("--appendonly", "no")
    yield started
    started.stop()


@pytest.fixture
async def fresh(server: RedisServer) -> AsyncIterator[RedisServer]:
    client = redis.Redis(port=server.port)
    client.flushall()
    client.close()
    yield server


async def _suspended(rt: Runtime, run_id: str) -> None:
    deadline = time.monotonic() + 20
    while (await rt.get_run(run_id)).status is not RunStatus.SUSPENDED:
        assert time.monotonic() < deadline, "the run never suspended"
        await asyncio.sleep(0.02)


@pytest.mark.redis
@pytest.mark.parametrize("partitions", [16, 64])
@pytest.mark.parametrize("workers", [1, 4])
async def test_an_idle_worker_issues_a_few_commands_a_second(
    fresh: RedisServer, partitions: int, workers: int
) -> None:
    async with AsyncExitStack() as stack:
        runtimes = [
            await stack.enter_async_context(Runtime(fresh.url, partitions=partitions))
            for _ in range(workers)
        ]
        pool = [Worker(rt) for rt in runtimes]  # the default settings
        for worker in pool:
            await stack.enter_async_context(running(worker))
        for worker in pool:
            await asyncio.wait_for(worker.ready.wait(), 20)
        # A deadline an hour ahead: the workers sleep towards it, they do not poll for it.
        run_id = await runtimes[0].start(idle_deadline_wf, "1h")
        await _suspended(runtimes[0], run_id)
        monitor = Monitor(fresh)
        monitor.mark("start")
        await asyncio.sleep(WINDOW)  # the counting window, not a wait for a condition
        monitor.mark("stop")
        counted = monitor.between("start", "stop")
        counted.pop("ECHO", None)
    per_worker_per_s = sum(counted.values()) / workers / WINDOW
    print(f"{workers} idle worker(s), {partitions} partitions: {dict(counted)}")
    print(f"  {per_worker_per_s:.2f} commands/s per worker")
    assert sum(counted.values()) <= BUDGET_PER_SECOND * WINDOW * workers, counted


@pytest.mark.redis
async def test_reclaim_and_unpark_are_one_command_whatever_the_partitions(
    fresh: RedisServer,
) -> None:
    async with Runtime(fresh.url, partitions=64) as rt:
        worker = Worker(rt)
        await rt.connect()
        await worker.fire_due()  # the clock is read and the scripts are loaded
        await worker.reclaim()
        await worker.leases.unpark()
        monitor = Monitor(fresh)
        monitor.mark("start")
        await worker.reclaim()
        await worker.leases.unpark()
        await worker.fire_due()
        monitor.mark("stop")
        counted = monitor.between("start", "stop")
    counted.pop("ECHO", None)
    assert counted == {"EVALSHA": 3}, counted


async def _fired_not_early(rt: Runtime, run_id: str) -> float:
    """The run's hook expired; the lateness (ms) of its expiry, which is never negative."""
    # generous: sanity, not a lateness bound
    assert await rt.wait(run_id, timeout=20) == "timed out", "the deadline never fired"
    events = await rt.events(run_id)
    [created] = [e for e in events if e.type == "hook.created"]
    [expired] = [e for e in events if e.type == "hook.expired"]
    lateness = int(expired.id.split("-")[0]) - int(created.data["expires_at"])  # both ms
    assert lateness >= 0, f"fired {-lateness} ms early"
    return float(lateness)


@pytest.mark.parametrize("later", ["1h", None])
async def test_an_earlier_deadline_wakes_a_worker_that_sleeps_towards_a_later_one(
    rt: Runtime, later: str | None
) -> None:
    # No safety scan within the test: only the notice can wake the loop in time.
    async with running(Worker(rt, timer_tick=3600)) as worker:
        await asyncio.wait_for(worker.ready.wait(), 10)
        if later is not None:
            await _suspended(rt, await rt.start(idle_deadline_wf, later))
        await asyncio.sleep(0.2)  # the loop is asleep now (not a condition: any time works)
        soon = await rt.start(idle_deadline_wf, "300ms")
        lateness = await _fired_not_early(rt, soon)
    print(f"fired {lateness:.0f} ms after it was due (sleeping towards {later})")


async def test_a_deadline_without_its_notice_is_found_by_the_safety_scan(rt: Runtime) -> None:
    """A deadline whose notice was lost (Redis came back from an older snapshot): the scan
    every ``timer_tick`` finds it."""
    store = raw(rt)
    async with running(Worker(rt, timer_tick=0.3)) as worker:
        await asyncio.wait_for(worker.ready.wait(), 10)
        await asyncio.sleep(0.1)
        deadlines = store.keys.key("deadlines", 0)
        due = await store.now_ms() + 100
        await store.client.zadd(deadlines, {"r-ghost|t|t1": due})  # no notice: no script
        deadline = time.monotonic() + 20
        while await store.client.zscore(deadlines, "r-ghost|t|t1") is not None:
            assert time.monotonic() < deadline, "the scan never fired the deadline"
            await asyncio.sleep(0.02)


@pytest.mark.redis
async def test_a_pass_at_a_due_time_covers_only_the_partitions_due(fresh: RedisServer) -> None:
    """FIRE_DUE runs one ZRANGE per partition it covers (and it is the only script that
    calls ZRANGE): firing one deadline at 64 partitions reads one partition, not 64."""
    async with (
        Runtime(fresh.url, partitions=64) as rt,
        running(Worker(rt, timer_tick=3600)) as worker,
    ):
        await asyncio.wait_for(worker.ready.wait(), 10)
        await asyncio.sleep(0.2)  # the first pass (all partitions) is done by now
        monitor = Monitor(fresh)
        monitor.mark("start")
        soon = await rt.start(idle_deadline_wf, "300ms")
        await _fired_not_early(rt, soon)
        monitor.mark("stop")
        inside = monitor.between("start", "stop", lua=True)
    print("inside the scripts:", dict(inside))
    assert 1 <= inside["ZRANGE"] <= 3, inside

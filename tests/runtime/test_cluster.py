"""The engine on a real 3-master Redis Cluster: the same scripts, single-slot by
construction (every key of a run, and its session's outbox, share a partition tag)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis

from runtime import (
    STEP_HOOK_TIMEOUT,
    RunStatus,
    Runtime,
    Worker,
    load_step_checkpoint,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)
from runtime.store.redis._keys import partition_of
from tests.helpers import running
from tests.processes import PARTITIONS, WorkerProcess
from tests.raw_redis import raw
from tests.redis_servers import RedisCluster

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    started = RedisCluster()
    yield started
    started.stop()


@pytest.fixture
async def crt(cluster: RedisCluster) -> AsyncIterator[Runtime]:
    cluster.flushall()
    async with Runtime(cluster.url, partitions=PARTITIONS) as runtime:
        yield runtime
    cluster.flushall()


setups: list[str] = []


@step
async def clustered_step(timeout: float | None) -> Any:
    if await load_step_checkpoint() is None:
        setups.append("setup")
        await save_step_checkpoint({"n": 1})
    answer = await step_hook("q", timeout=timeout, on_timeout="return", prompt="?")
    return "timeout" if answer is STEP_HOOK_TIMEOUT else answer


@workflow(name="clustered")
async def clustered(timeout: float | None = None) -> Any:
    return await clustered_step(timeout)


async def test_hitl_lifecycle_on_cluster(crt: Runtime) -> None:
    setups.clear()
    worker = Worker(crt)
    session = Runtime.new_session_id()
    run_ids = [await crt.start(clustered, session=session if i == 0 else None) for i in range(8)]
    await worker.drain()
    hooks = await crt.list_hooks()
    assert {h.run_id for h in hooks} == set(run_ids)  # spread over all partitions/nodes
    for hook in hooks:
        assert await crt.resume_hook(hook.token, hook.run_id)
    await worker.drain()
    for run_id in run_ids:
        assert await crt.wait(run_id, timeout=10) == run_id
    assert setups == ["setup"] * 8
    outbox = [m["type"] for _, m in await crt.read_outbox(session)]
    assert outbox == ["prompt", "answered", "status"]  # the outbox shares the run's slot
    # the ended runs compacted, one script per partition: each a single slot
    before = {run_id: await crt.events(run_id) for run_id in run_ids}
    assert await raw(crt).flush_compactions() == 8
    assert {run_id: await crt.events(run_id) for run_id in run_ids} == before


async def test_runs_spread_over_the_cluster_nodes(crt: Runtime, cluster: RedisCluster) -> None:
    run_ids = [await crt.start(clustered) for _ in range(40)]
    per_node: dict[int, set[str]] = {}
    for node in cluster.nodes:  # each node's own keys (a node holds only its slots)
        client = redis.Redis(port=node.port)
        try:
            per_node[node.port] = {
                key.decode().rsplit(":", 1)[1]
                for key in client.scan_iter("parley:*:run:r-*", count=1000)
                if not key.decode().endswith(("events", "hooks", "ckpt"))
            }
        finally:
            client.close()
    print("runs per node:", {port: len(ids) for port, ids in per_node.items()})
    assert set().union(*per_node.values()) == set(run_ids)
    assert sum(1 for ids in per_node.values() if ids) > 1, per_node


async def test_timeouts_and_cancel_on_cluster(crt: Runtime) -> None:
    worker = Worker(crt, timer_tick=0.01)
    timed = await crt.start(clustered, 0.05)
    cancelled = await crt.start(clustered, 3600)
    async with running(worker):
        assert await crt.wait(timed, timeout=10) == "timeout"
        deadline = time.monotonic() + 10
        while (await crt.get_run(cancelled)).status is not RunStatus.SUSPENDED:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await crt.cancel(cancelled)
    assert (await crt.get_run(cancelled)).status is RunStatus.CANCELLED
    assert await crt.list_hooks() == []
    # operator views scan every node
    assert {r.run_id for r in await crt.list_runs()} == {timed, cancelled}
    stats = await crt.stats()
    assert (stats["started"], stats["completed"], stats["cancelled"]) == (2, 1, 1)


async def test_crash_recovery_on_cluster(crt: Runtime, cluster: RedisCluster) -> None:
    doomed = WorkerProcess(cluster.url, "tests.apps.hitl_app", crash_at="after_checkpoint_save")
    rescuer = None
    try:
        run_id = await crt.start("echo")
        assert doomed.wait_exit() == -9
        rescuer = WorkerProcess(cluster.url, "tests.apps.hitl_app")
        deadline = time.monotonic() + 15
        while not await crt.list_hooks():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        [hook] = await crt.list_hooks()
        await crt.resume_hook(hook.token, "after crash")
        assert await crt.wait(run_id, timeout=15) == {"answer": "after crash"}
        types = [e.type for e in await crt.events(run_id)]
        assert types.count("hook.created") == 1
    finally:
        doomed.stop()
        if rescuer is not None:
            rescuer.stop()


async def test_runs_and_hooks_listed_by_tag_on_cluster(crt: Runtime) -> None:
    """The tag index is per partition (each partition's sets share its hash tag): every
    script stays single-slot, and listing reads each partition's set on its own node."""
    tagged = []
    for i in range(12):
        tagged.append(await crt.start(clustered, 3600, tags={"customer": "acme"}))
        await crt.start(clustered, 3600, tags={"customer": f"other{i}"})
        await asyncio.sleep(0.002)
    async with running(Worker(crt)):
        deadline = time.monotonic() + 10
        while len(await crt.list_hooks(tag="customer:acme")) < len(tagged):
            assert time.monotonic() < deadline, "the tagged runs never all suspended"
            await asyncio.sleep(0.05)
    listed = [r.run_id for r in await crt.list_runs(tag="customer:acme")]
    assert listed == tagged[::-1]
    assert [r.run_id for r in await crt.list_runs(tag="customer:acme", limit=5)] == tagged[:-6:-1]
    await crt.cancel(tagged[0])
    assert [r.run_id for r in await crt.list_runs(tag="customer:acme", status="cancelled")] == [
        tagged[0]
    ]
    assert len(await crt.list_hooks(tag="customer:acme")) == len(tagged) - 1


async def test_dead_consumers_are_swept_on_cluster(crt: Runtime) -> None:
    """lua/sweep.lua goes one partition per call on a cluster (a script's streams share a
    slot): a dead consumer delivered a task in every partition is swept from each."""
    store = crt.store
    partitions = store.partitions
    first_of: dict[int, str] = {}
    for n in range(1000):
        first_of.setdefault(partition_of(f"r-swept-{n}", partitions), f"r-swept-{n}")
    for run_id in first_of.values():
        assert await store.start(run_id, "wf", None, b'{"args":[],"kwargs":{}}')
    read = [t for src in store.task_sources() for t in await store.read_tasks("dead", src, 9, None)]
    assert len(read) == partitions
    assert len(await store.reclaim("me", 0)) == partitions  # what the dead consumer held
    await asyncio.sleep(0.12)
    assert await store.sweep_consumers("me", 50) == partitions
    assert await store.sweep_consumers("me", 50) == 0

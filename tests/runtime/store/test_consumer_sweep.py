"""The sweep of the consumers dead workers leave in the task groups (lua/sweep.lua, through
``Store.sweep_consumers``), on the embedded store and on real Redis: a consumer idle longer
than the threshold with nothing pending is deleted, every other one is kept, and a task
delivered to a consumer while the sweep runs is never dropped with it.

Consumers and their pending lists are read raw (XINFO CONSUMERS, XPENDING). A "dead"
consumer is one that read a task with XREADGROUP and whose task the caller then reclaimed:
what a worker killed with SIGKILL leaves (tests/runtime/worker/test_consumer_sweep.py has
a real one)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runtime import Runtime
from runtime.settings import TASKS_GROUP
from runtime.store.redis import RedisStore, keys
from runtime.store.redis._keys import partition_of
from tests.raw_redis import raw

ME = "me"  # the sweeping worker's own consumer
THRESHOLD_MS = 50
PAST_IT = 0.12  # seconds to wait for a consumer to be idle beyond the threshold

Sweep = Callable[[RedisStore, str, int], Awaitable[int]]


async def consumers(store: RedisStore, partition: int) -> dict[str, int]:
    """The consumers listed in the partition's task group: name -> tasks pending."""
    listed: Any = await store.client.xinfo_consumers(keys.key("tasks", partition), TASKS_GROUP)
    return {c["name"].decode(): int(c["pending"]) for c in listed}


async def everywhere(store: RedisStore) -> set[str]:
    names: set[str] = set()
    for partition in range(store.partitions):
        names |= set(await consumers(store, partition))
    return names


def run_in(partition: int, partitions: int, tag: str) -> str:
    """A run id of ``partition``."""
    n = 0
    while partition_of(f"r-sweep-{tag}-{n}", partitions) != partition:
        n += 1
    return f"r-sweep-{tag}-{n}"


async def start(store: RedisStore, partition: int, tag: str) -> str:
    run_id = run_in(partition, store.partitions, tag)
    assert await store.start(run_id, "wf", None, b'{"args":[],"kwargs":{}}')
    return run_id


async def read(store: RedisStore, consumer: str, partition: int) -> list[str]:
    """What ``consumer`` reads of the partition's new tasks (their message ids)."""
    tasks = await store.read_tasks(consumer, (partition,), 100, None)
    return [t.message_id for t in tasks]


async def left_by_a_dead_worker(store: RedisStore, name: str, partition: int = 0) -> None:
    """``name`` read a task of ``partition`` and died; the caller took the task over."""
    await start(store, partition, name)
    assert await read(store, name, partition)
    assert await store.reclaim(ME, 0)  # now the caller's: the dead one holds nothing
    assert (await consumers(store, partition))[name] == 0


async def test_a_dead_workers_consumer_idle_beyond_the_threshold_is_deleted(
    rt: Runtime,
) -> None:
    store = raw(rt)
    await left_by_a_dead_worker(store, "dead")
    listed = [p for p in range(store.partitions) if "dead" in await consumers(store, p)]
    await asyncio.sleep(PAST_IT)
    assert await store.sweep_consumers(ME, THRESHOLD_MS) == len(listed)
    assert "dead" not in await everywhere(store)
    assert ME in await everywhere(store)  # it holds the task it took over
    assert await store.sweep_consumers(ME, THRESHOLD_MS) == 0  # a second sweep: nothing


async def test_a_consumer_with_a_pending_task_is_kept_however_idle(rt: Runtime) -> None:
    store = raw(rt)
    await start(store, 0, "held")
    [held] = await read(store, "holder", 0)
    await asyncio.sleep(PAST_IT)
    await store.sweep_consumers(ME, THRESHOLD_MS)
    assert (await consumers(store, 0))["holder"] == 1
    [taken] = await store.reclaim(ME, 0)  # the pending record is there to be reclaimed
    assert taken.message_id == held


async def test_a_consumer_idle_less_than_the_threshold_is_kept(rt: Runtime) -> None:
    store = raw(rt)
    await left_by_a_dead_worker(store, "recent")
    await asyncio.sleep(PAST_IT)
    assert await store.sweep_consumers(ME, 60_000) == 0
    assert "recent" in await consumers(store, 0)


async def test_the_sweeping_workers_own_consumer_is_kept(rt: Runtime) -> None:
    store = raw(rt)
    await start(store, 0, "own")
    [task] = await store.read_tasks(ME, (0,), 100, None)
    await store.hand_back(task)  # acknowledged: the caller's consumer holds nothing now
    await asyncio.sleep(PAST_IT)
    assert await store.sweep_consumers(ME, THRESHOLD_MS) == 0
    assert (await consumers(store, 0))[ME] == 0
    # idle and empty, so any other worker's sweep deletes it
    assert await store.sweep_consumers("another", THRESHOLD_MS) >= 1
    assert ME not in await everywhere(store)


# The race: a task delivered between the sweep's look at a consumer and its deletion ----


async def the_store_sweeps(store: RedisStore, consumer: str, idle_ms: int) -> int:
    return await store.sweep_consumers(consumer, idle_ms)


async def a_check_before_the_delete(store: RedisStore, consumer: str, idle_ms: int) -> int:
    """The sweep done wrong: each consumer looked at, then deleted, in two commands."""
    swept = 0
    for partition in range(store.partitions):
        stream = keys.key("tasks", partition)
        listed: Any = await store.client.xinfo_consumers(stream, TASKS_GROUP)
        for c in listed:
            if c["name"].decode() != consumer and c["pending"] == 0 and c["idle"] > idle_ms:
                await store.client.xgroup_delconsumer(stream, TASKS_GROUP, c["name"])
                swept += 1
    return swept


async def delivered_during_a_sweep(
    store: RedisStore, sweep: Sweep, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, list[list[Any]]]:
    """A dead consumer, idle and empty, is delivered a new task while ``sweep`` runs: after
    the sweep's first command, before its next one (or after it, if it sent only one).
    Returns the task's message id and the partition's pending entries after the sweep."""
    await left_by_a_dead_worker(store, "victim")
    await asyncio.sleep(PAST_IT)
    await start(store, 0, "late")  # queued, not delivered yet
    delivered: list[str] = []

    async def deliver() -> None:
        delivered.extend(await read(store, "victim", 0))

    pool = store.client.connection_pool
    checkout = pool.get_connection
    checkouts = 0

    async def get_connection(*args: Any, **kwargs: Any) -> Any:
        nonlocal checkouts
        checkouts += 1
        if checkouts == 2:  # the sweep's first command was answered
            await deliver()
        return await checkout(*args, **kwargs)

    monkeypatch.setattr(pool, "get_connection", get_connection)
    await sweep(store, ME, THRESHOLD_MS)
    if not delivered:  # one command: the sweep was atomic whatever it did
        await deliver()
    monkeypatch.undo()
    [message_id] = delivered
    pending: Any = await store.client.xpending_range(
        keys.key("tasks", 0), TASKS_GROUP, "-", "+", 100
    )
    return message_id, [[p["message_id"].decode(), p["consumer"].decode()] for p in pending]


async def test_a_task_delivered_while_the_sweep_runs_stays_pending(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lua/sweep.lua checks and deletes in one step: the task the victim was delivered
    mid-sweep is in its pending list after the sweep (so a reclaim finds it), whether the
    delivery came before the script (the victim is kept) or after it (the read created the
    victim again)."""
    store = raw(rt)
    message_id, pending = await delivered_during_a_sweep(store, the_store_sweeps, monkeypatch)
    assert [message_id, "victim"] in pending
    reclaimed = [t.message_id for t in await store.reclaim("rescuer", 0)]
    assert message_id in reclaimed


async def test_the_race_is_caught_when_the_check_comes_before_the_delete(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test above is not vacuous: with the check made in a command before the delete,
    the same delivery lands in between and XGROUP DELCONSUMER drops the task's pending
    record (no reclaim would ever find it: its run would wait for ever)."""
    store = raw(rt)
    message_id, pending = await delivered_during_a_sweep(
        store, a_check_before_the_delete, monkeypatch
    )
    assert message_id not in [entry_id for entry_id, _ in pending]
    assert message_id not in [t.message_id for t in await store.reclaim("rescuer", 0)]

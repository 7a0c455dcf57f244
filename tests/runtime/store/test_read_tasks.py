"""Reading the task streams (``RedisStore.read_tasks``) on a real Redis: the reply is read
as Redis sends it (a map on RESP3, pairs on RESP2, nil when nothing came), not through
redis-py's reply callbacks; a stream that lost its group is repaired and said so."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from runtime import Runtime
from runtime.errors import StoreReset
from runtime.settings import TASKS_GROUP
from runtime.store.redis import _keys
from tests.raw_redis import raw

PARTITIONS = 4


@pytest.mark.parametrize("protocol", [2, 3])
async def test_tasks_are_read_alike_on_resp2_and_resp3(redis_url: str, protocol: int) -> None:
    async with Runtime(f"{redis_url}?protocol={protocol}", partitions=PARTITIONS) as rt:
        store = raw(rt)
        assert store.client.connection_pool.connection_kwargs.get("protocol") == protocol
        everything = tuple(range(PARTITIONS))
        # nil (RESP2) or an empty map (RESP3) when a blocking read times out
        assert await store.read_tasks("c1", everything, 10, 50) == []
        sent: dict[tuple[int, bytes], tuple[str, str]] = {}  # ids are per stream
        for partition in everything:
            stream = _keys.key("tasks", partition)
            # the engine's field order (lib.lua's enqueue), and another one: read by name
            engine = await store.client.xadd(stream, {"r": f"r-{partition}", "w": "wf"})
            sent[partition, engine] = (f"r-{partition}", "wf")
            other = await store.client.xadd(stream, {"w": "other", "r": f"s-{partition}"})
            sent[partition, other] = (f"s-{partition}", "other")
        # a message that names no workflow (decided after the claim)
        sent[0, await store.client.xadd(_keys.key("tasks", 0), {"r": "t-0"})] = ("t-0", "")
        tasks = await store.read_tasks("c1", everything, 100, None)
        assert {(t.partition, t.message_id.encode()): (t.run_id, t.workflow) for t in tasks} == sent
        assert len(tasks) == len(sent)
        # delivered once to the group: a second read has nothing
        assert await store.read_tasks("c2", everything, 100, None) == []
        # COUNT is per stream
        for partition in everything:
            await store.client.xadd(_keys.key("tasks", partition), {"r": "x", "w": "wf"})
            await store.client.xadd(_keys.key("tasks", partition), {"r": "y", "w": "wf"})
        assert len(await store.read_tasks("c1", everything, 1, None)) == PARTITIONS


async def test_a_stream_that_lost_its_group_is_recreated_and_the_reader_told(
    redis_url: str,
) -> None:
    """Redis restarted empty: XREADGROUP says NOGROUP. The read raises StoreReset (what the
    worker logs and goes on from) and the groups exist again, so the next task is read."""
    async with Runtime(redis_url, partitions=PARTITIONS) as rt:
        store = raw(rt)
        everything = tuple(range(PARTITIONS))
        client: aioredis.Redis = store.client
        await client.delete(*[_keys.key("tasks", p) for p in everything])
        with pytest.raises(StoreReset, match="task groups were recreated"):
            await store.read_tasks("c1", everything, 10, None)
        for partition in everything:
            groups = await client.xinfo_groups(_keys.key("tasks", partition))
            assert [g["name"] for g in groups] == [TASKS_GROUP.encode()]
        message = await client.xadd(_keys.key("tasks", 2), {"r": "r-1", "w": "wf"})
        [task] = await store.read_tasks("c1", everything, 10, None)
        assert (task.run_id, task.workflow, task.partition) == ("r-1", "wf", 2)
        assert task.message_id.encode() == message

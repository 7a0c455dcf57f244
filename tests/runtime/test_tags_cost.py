"""Listing runs by tag reads the tag index: the number of Redis commands it costs depends
on the page size and the partitions, not on how many runs the store holds (counted by the
server, INFO commandstats, on a private redis-server; never timed)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from bench.tags import PARTITIONS, TAG, list_by_tag, populate
from runtime import Runtime
from runtime.testing import RedisServer

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")


@pytest.fixture
async def private() -> AsyncIterator[tuple[Runtime, aioredis.Redis]]:
    server = RedisServer()
    client = aioredis.Redis.from_url(server.url)
    try:
        async with Runtime(server.url, partitions=PARTITIONS) as rt:
            yield rt, client
    finally:
        await client.aclose()
        server.stop()


async def test_listing_by_tag_costs_the_same_commands_in_a_store_ten_times_larger(
    private: tuple[Runtime, aioredis.Redis],
) -> None:
    rt, client = private
    await populate(rt, 600, 150)
    small = await list_by_tag(rt, client, 100)
    await populate(rt, 6000, 0)  # ten times more runs, none of them tagged customer=acme
    large = await list_by_tag(rt, client, 100)
    assert small["listed"] == large["listed"] == 100
    # one ZREVRANGE per partition, one HGETALL per listed run
    assert (
        small["by_command"]
        == large["by_command"]
        == {
            "zrevrange": PARTITIONS,
            "hgetall": 100,
        }
    )
    scanned = await rt.list_runs(tag=TAG)
    assert len(scanned) == 150 and all(r.tags[TAG[0]] == TAG[1] for r in scanned)

"""Runs spread over the partitions: read from the real Redis keys, not from ``partition_of``
(a hash that sent every run to one partition would leave the others idle, and a cluster
with one busy node). The cluster side is in ``test_cluster.py``."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import redis

from runtime import Runtime, Worker, workflow
from tests.raw_redis import raw

pytestmark = pytest.mark.redis

PARTITIONS = 4
RUNS = 100  # P(a partition gets none of them) = 4 * (3/4)^100, about 1e-12
RUN_KEY = re.compile(r"^parley:\{p:(\d+)\}:run:(r-[0-9a-f]{24})$")


@workflow(name="spread_wf")
async def spread_wf(n: int) -> int:
    return n


def partitions_of_runs(client: redis.Redis) -> dict[str, int]:
    """run id -> the partition its run hash is stored in, from the keys in Redis."""
    found: dict[str, int] = {}
    for key in client.scan_iter("parley:*:run:*", count=1000):
        match = RUN_KEY.match(key.decode())
        if match:
            found[match[2]] = int(match[1])
    return found


async def test_runs_spread_over_every_partition(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        async with Runtime(redis_url, partitions=PARTITIONS) as rt:
            run_ids = [await rt.start(spread_wf, n) for n in range(RUNS)]
            where = partitions_of_runs(client)
            assert set(where) == set(run_ids)
            per_partition = Counter(where.values())
            print("runs per partition:", dict(sorted(per_partition.items())))
            assert set(per_partition) == set(range(PARTITIONS)), per_partition
            # each run's task went to its own partition's stream, its events next to it
            for p in range(PARTITIONS):
                assert client.xlen(f"parley:{{p:{p}}}:tasks") == per_partition[p]
            for run_id, p in where.items():
                assert client.exists(f"parley:{{p:{p}}}:run:{run_id}:events") == 1

            await Worker(rt).drain()  # one worker consumes every partition
            for n, run_id in enumerate(run_ids):
                assert await rt.wait(run_id, timeout=5) == n
            for p in range(PARTITIONS):
                assert client.xpending(f"parley:{{p:{p}}}:tasks", "workers")["pending"] == 0
    finally:
        client.close()


async def test_sessions_spread_and_their_runs_follow_them(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        async with Runtime(redis_url, partitions=PARTITIONS) as rt:
            sessions = [rt.new_session_id() for _ in range(40)]
            runs = {await rt.start(spread_wf, 0, session=s): s for s in sessions}
            where = partitions_of_runs(client)
            # a session's outbox lives in the partition of its runs (one-slot scripts)
            for run_id, session in runs.items():
                assert (
                    raw(rt)
                    .session_key("outbox", session)
                    .startswith(f"parley:{{p:{where[run_id]}}}:")
                )
            assert len(set(where.values())) > 1, where
    finally:
        client.close()

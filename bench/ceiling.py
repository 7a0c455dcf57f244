"""This machine's ceiling: what the same redis-server serves for trivial pipelined scripts.

A lifecycle of the HITL benchmark costs about 7 script calls (start, claim, checkpoint,
suspension, answer, claim, completion), so ``ceiling lifecycles/s = scripts/s / 7``: what a
client with no cost of its own could reach. Parley's lifecycles/s as a fraction of it is a
figure that travels between machines better than lifecycles/s.

Measured with ``redis-benchmark`` when installed (a C client: ``-P`` pipelined, ``-c``
connections, EVALSHA of :data:`SCRIPT` on random keys), else with redis-py (pipelines of
EVALSHA from a few concurrent connections; slower, since the client is Python).
"""

from __future__ import annotations

import asyncio
import csv
import io
import shutil
import subprocess
import time
from typing import Any
from urllib.parse import urlparse

import redis.asyncio as aioredis

from .common import Row, bench_redis, load_average, print_report

SCRIPTS_PER_LIFECYCLE = 7
KEYSPACE = 1000  # random keys: bounded memory (about 100 KB), not one hot key
# A few cheap commands on a hash, a set and a counter, like an engine script's bookkeeping.
SCRIPT = """
redis.call('HSET', KEYS[1], 'status', ARGV[1])
redis.call('HGET', KEYS[1], 'status')
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[2], ARGV[1])
return redis.call('INCR', KEYS[3])
"""
KEYS = ("bench:ceiling:h:__rand_int__", "bench:ceiling:s:__rand_int__", "bench:ceiling:n")


async def measure_ceiling(
    url: str, scripts: int = 200_000, *, pipeline: int = 32, clients: int = 4
) -> dict[str, Any]:
    """Scripts/s and ceiling lifecycles/s on the server at ``url`` (``scripts`` calls)."""
    client = aioredis.Redis.from_url(url)
    try:
        sha = str(await client.script_load(SCRIPT))
        tool = shutil.which("redis-benchmark")
        if tool is not None:
            rate = await asyncio.to_thread(
                _redis_benchmark, tool, url, sha, scripts, pipeline, clients
            )
            how = f"redis-benchmark -P {pipeline} -c {clients}"
        else:
            rate = await _redis_py(client, sha, scripts, pipeline, clients)
            how = f"redis-py pipelines of {pipeline}, {clients} connections"
        # The keys are the ceiling's, not the benchmark's: leave nothing behind.
        for pattern in ("bench:ceiling:*",):
            async for key in client.scan_iter(match=pattern, count=1000):
                await client.delete(key)
    finally:
        await client.aclose()
    return {
        "scripts": scripts,
        "scripts_per_s": round(rate),
        "scripts_per_lifecycle": SCRIPTS_PER_LIFECYCLE,
        "lifecycles_per_s": round(rate / SCRIPTS_PER_LIFECYCLE),
        "how": how,
    }


def _redis_benchmark(
    tool: str, url: str, sha: str, scripts: int, pipeline: int, clients: int
) -> float:
    where = urlparse(url)
    cmd = [
        tool, "-h", where.hostname or "127.0.0.1", "-p", str(where.port or 6379),
        "-n", str(scripts), "-c", str(clients), "-P", str(pipeline), "-r", str(KEYSPACE),
        "--csv", "EVALSHA", sha, "3", *KEYS, "v",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, check=True, timeout=300).stdout.decode()
    rows = [r for r in csv.reader(io.StringIO(out)) if len(r) > 1]
    return float(rows[-1][1])  # "test","rps",...: the last row is the EVALSHA line


async def _redis_py(
    client: aioredis.Redis, sha: str, scripts: int, pipeline: int, clients: int
) -> float:
    batches = max(1, scripts // pipeline)
    left = [batches]

    async def worker(n: int) -> None:
        while left[0] > 0:
            left[0] -= 1
            async with client.pipeline(transaction=False) as pipe:
                for i in range(pipeline):
                    k = str((n * 7919 + i) % KEYSPACE)
                    pipe.evalsha(sha, 3, f"bench:ceiling:h:{k}", f"bench:ceiling:s:{k}",
                                 "bench:ceiling:n", "v")  # fmt: skip
                await pipe.execute()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(clients)))
    return batches * pipeline / (time.perf_counter() - t0)


def fraction(lifecycles_per_s: float, ceiling: dict[str, Any]) -> float:
    """Parley's lifecycles/s as a fraction of the ceiling's (0 when unmeasured)."""
    top = float(ceiling.get("lifecycles_per_s") or 0)
    return round(lifecycles_per_s / top, 4) if top else 0.0


def ceiling_rows(result: dict[str, Any]) -> list[Row]:
    """The ceiling and Parley's fraction of it (``result``: a main/scale/report result)."""
    ceiling = result.get("ceiling") or {}
    if not ceiling:
        return []
    return [
        (
            "this machine's ceiling, lifecycles/s",
            f"{ceiling['lifecycles_per_s']:,} ({ceiling['scripts_per_s']:,} scripts/s "
            f"/ {ceiling['scripts_per_lifecycle']})",
            "",
            "",
        ),
        (
            "  Parley's lifecycles/s as a fraction of it",
            f"{result['fraction_of_ceiling']:.1%}",
            "",
            "",
        ),
    ]


async def run_ceiling(args: Any) -> dict[str, Any]:
    """``--mode ceiling``: the ceiling alone, on a private redis-server (or ``--redis``)."""
    async with bench_redis(args) as url:
        ceiling = await measure_ceiling(url, args.ceiling_scripts or 100_000)
    notes = [f"ceiling measured with {ceiling['how']}"]
    result = {"bench": "ceiling", "load_avg": load_average(), "ceiling": ceiling,
              "fraction_of_ceiling": 0.0, "problems": []}  # fmt: skip
    if getattr(args, "print", True):
        print_report("this machine's Redis ceiling", ceiling_rows(result)[:1], notes, result)
    return result

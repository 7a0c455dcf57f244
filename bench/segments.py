"""``python -m bench.segments``: Redis bytes per finished bench run by how many runs share
its archive segment (runtime/store/redis/_archive.py).

A segment holds the runs of one partition whose compaction came due together: in
``bench.hitl``'s burst of 2,000 runs ~80 each (its ~64 KB), under a trickle of ends one.
So the bytes a finished run keeps depend on the rate runs end at; this measures them at
``--sizes`` runs per segment. For each size k, on a private redis-server with one
partition and an in-process worker: ``--runs`` bench runs (``bench/app.py``) are started,
answered and completed k at a time, and compacted after each k (``flush_compactions``):
segments of exactly k. Printed per k: ``MEMORY USAGE`` of a finished run's hash, its share
of its segment (the segment's ``MEMORY USAGE`` ÷ k) and their sum, what a finished run
keeps (``used_memory_dataset`` deltas are too noisy at these counts; the partition's
indexes hold nothing of a finished bench run).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import orjson
import redis.asyncio as aioredis

from runtime import Runtime, Worker
from runtime.models import RunStatus
from runtime.store.redis import RedisStore, keys

from .app import WORKFLOW
from .common import token_of
from .harness import start_redis
from .lifecycle import ANSWER


async def _lifecycles(rt: Runtime, k: int) -> list[str]:
    """k bench runs from start to completion, together."""
    run_ids = [await rt.start(WORKFLOW) for _ in range(k)]
    for run_id in run_ids:
        while (info := await rt.get_run(run_id)) is None or info.status is not RunStatus.SUSPENDED:
            await asyncio.sleep(0.005)
    for run_id in run_ids:
        await rt.resume_hook(token_of(run_id), ANSWER)
    for run_id in run_ids:
        await rt.wait(run_id)
    return run_ids


async def _size(url: str, k: int, runs: int) -> dict[str, float]:
    # emptied before the runtime connects (which makes the task groups it needs)
    async with aioredis.from_url(url) as client:
        await client.flushdb()
    async with Runtime(url, partitions=1) as rt:
        store = rt.store
        assert isinstance(store, RedisStore)
        worker = Worker(rt, concurrency=64)
        task = asyncio.create_task(worker.run())
        try:
            await _lifecycles(rt, k)  # warm: the store's scripts, indexes and pools exist
            await store.flush_compactions()
            run_ids: list[str] = []
            for _ in range(max(1, runs // k)):
                run_ids += await _lifecycles(rt, k)
                assert await store.flush_compactions() == k
        finally:
            worker.stop()
            await task
        hashes = [keys.run_keys(run_id, 1).run for run_id in run_ids]
        segments = {await store.client.hget(run_hash, "archive") for run_hash in hashes}
        run_bytes = sum([await store.client.memory_usage(h, samples=0) or 0 for h in hashes])
        segment_keys = [keys.key("segment", 0, segment_id=_text(s)) for s in segments]
        sizes = [await store.client.memory_usage(key, samples=0) or 0 for key in segment_keys]
        segment_bytes = sum(sizes)
        return {
            "runs_per_segment": k,
            "runs": len(run_ids),
            "run_hash_bytes": round(run_bytes / len(run_ids), 1),
            "segment_share_bytes": round(segment_bytes / len(run_ids), 1),
            "finished_run_bytes": round((run_bytes + segment_bytes) / len(run_ids), 1),
        }


def _text(value: Any) -> str:
    assert value is not None, "a finished run's hash names no segment"
    return value.decode() if isinstance(value, bytes) else str(value)


async def main_async(args: argparse.Namespace) -> None:
    server = start_redis()
    try:
        rows = [await _size(server.url, k, args.runs) for k in args.sizes]
    finally:
        server.stop()
    print("MEMORY USAGE per finished bench run, bytes (Redis defaults)")
    print(f"{'runs/segment':>12} {'run hash':>9} {'segment share':>14} {'total':>7}")
    for row in rows:
        print(
            f"{row['runs_per_segment']:>12} {row['run_hash_bytes']:>9}"
            f" {row['segment_share_bytes']:>14} {row['finished_run_bytes']:>7}"
        )
    print(orjson.dumps({"bench": "segments", "sizes": rows}).decode())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.segments", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 6, 20, 80])
    parser.add_argument("--runs", type=int, default=480, help="runs per size (whole segments)")
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main(sys.argv[1:])

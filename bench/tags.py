"""Listing runs by tag: how many Redis commands it costs, and that the number does not grow
with the store.

``python -m bench.tags [--runs 100000] [--tagged 1000] [--limit 100]`` starts its own
redis-server, starts ``--runs`` runs (``--tagged`` of them tagged ``customer=acme``, the
others ``customer=other-<n>`` or untagged), then lists the newest ``--limit`` runs tagged
``customer=acme`` and prints the commands Redis executed for it (``INFO commandstats``,
server side: every command, also those inside scripts), the round trips' wall time, and
for comparison the same listing without the index (a scan of the store). Times are
printed, never asserted: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import redis.asyncio as aioredis

from runtime import Runtime, workflow
from runtime.testing import RedisServer

T = TypeVar("T")
TAG = ("customer", "acme")
PARTITIONS = 16


@workflow(name="bench_tagged")
async def bench_tagged() -> None:  # never executed: the bench starts runs, runs no worker
    return None


async def commands(client: aioredis.Redis) -> dict[str, int]:
    """Commands Redis has executed so far, by name (``INFO commandstats``)."""
    info = await client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(stat["calls"]) for name, stat in info.items()}


async def count_commands(
    client: aioredis.Redis, action: Callable[[], Awaitable[T]]
) -> tuple[T, dict[str, int]]:
    """``action``'s result and the commands Redis executed for it (the INFO calls of the
    measurement itself left out)."""
    before = await commands(client)
    result = await action()
    after = await commands(client)
    spent = {name: n - before.get(name, 0) for name, n in after.items()}
    spent["info"] = spent.get("info", 0) - 1  # the "after" INFO counted itself
    return result, {name: n for name, n in spent.items() if n > 0}


async def populate(rt: Runtime, runs: int, tagged: int, *, chunk: int = 2000) -> None:
    """Start ``runs`` runs: ``tagged`` of them (spread evenly) tagged ``customer=acme``,
    half of the others tagged with another customer, the rest untagged."""
    every = max(1, runs // tagged) if tagged else 0

    def tags(i: int) -> dict[str, str] | None:
        if every and i % every == 0 and i // every < tagged:
            return {TAG[0]: TAG[1], "priority": "high"}
        return {TAG[0]: f"other-{i % 50}"} if i % 2 else None

    for start in range(0, runs, chunk):
        await asyncio.gather(
            *(rt.start(bench_tagged, tags=tags(i)) for i in range(start, min(runs, start + chunk)))
        )


async def list_by_tag(rt: Runtime, client: aioredis.Redis, limit: int) -> dict[str, Any]:
    began = time.perf_counter()
    listed, spent = await count_commands(client, lambda: rt.list_runs(tag=TAG, limit=limit))
    return {
        "listed": len(listed),
        "commands": sum(spent.values()),
        "by_command": spent,
        "ms": round((time.perf_counter() - began) * 1000, 1),
    }


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.tags", description=__doc__)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--tagged", type=int, default=1_000)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--no-scan", action="store_true", help="skip the scan comparison")
    args = parser.parse_args(argv)
    server = RedisServer()
    try:
        client = aioredis.Redis.from_url(server.url)
        async with Runtime(server.url, partitions=PARTITIONS) as rt:
            began = time.perf_counter()
            await populate(rt, args.runs, args.tagged)
            filled = time.perf_counter() - began
            by_tag = await list_by_tag(rt, client, args.limit)
            result: dict[str, Any] = {
                "runs": args.runs,
                "tagged": args.tagged,
                "limit": args.limit,
                "partitions": PARTITIONS,
                "populate_s": round(filled, 1),
                "by_tag": by_tag,
            }
            if not args.no_scan:
                began = time.perf_counter()
                _, scan = await count_commands(client, lambda: rt.list_runs(limit=args.limit))
                result["scan"] = {
                    "commands": sum(scan.values()),
                    "ms": round((time.perf_counter() - began) * 1000, 1),
                }
        await client.aclose()
    finally:
        server.stop()
    print(f"runs in the store                 {result['runs']:>10,}")
    print(f"runs tagged customer=acme         {result['tagged']:>10,}")
    print(f"listed by tag (limit {args.limit})          {by_tag['listed']:>10,}")
    print(f"Redis commands, by tag            {by_tag['commands']:>10,}   {by_tag['by_command']}")
    print(f"wall time, by tag                 {by_tag['ms']:>10,} ms")
    if "scan" in result:
        print(f"Redis commands, scan (no index)   {result['scan']['commands']:>10,}")
        print(f"wall time, scan                   {result['scan']['ms']:>10,} ms")
    print(orjson.dumps(result).decode())
    return result


if __name__ == "__main__":
    asyncio.run(main())

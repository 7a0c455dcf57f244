"""``python -m bench.floor``: the least CPU a Python worker spends per HITL lifecycle on
Redis alone, without the engine: how much of a worker's figure is the transport.

A worker's share of a lifecycle is five script calls (bench/ceiling.py counts seven; the
start and the answer are the driver's): for the start, a claim, the checkpoint and the
suspension; for the resume, a claim and the completion. This bench makes exactly those
calls from one Python process, on the loop a worker uses (uvloop where installed), with
trivial scripts whose arguments and replies have the sizes of the real ones (a claim's
reply ~500 bytes, a write's payload ~300), and nothing else: no decoding, no replay, no
records, no compaction. Two shapes:

- ``tasks``: Parley's transport as it is. One asyncio task per execution (two per
  lifecycle, the resume's after the start's), each awaiting its calls one by one through
  the store's :class:`~runtime.store.redis._batch.Batcher`, which pipelines the calls of
  one loop turn; ``--concurrency`` lifecycles in flight (a worker's 64).
- ``batch``: the shape of a worker that claims and replays runs by batch in one
  coroutine. ``--concurrency`` runs at a time, each of the five calls sent for the whole
  batch in one round trip; no task, future or timeout per run.

Printed per shape, median of ``--repeats``: lifecycles/s, CPU µs per lifecycle of this
process and of redis-server. A worker's figure in ``bench.hitl`` less ``tasks`` is what
the engine costs; ``tasks`` less ``batch`` bounds what batching the transport can save. The
two figures are the floor a redesign of the worker starts from (issue 14, item 1).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis.asyncio as aioredis

from runtime._loop import describe, run
from runtime.store.redis._batch import Batcher, Script

from .common import Row, bench_redis, bounded, load_average, print_report

# Bookkeeping like an engine script's (a hash, a set, a counter), then a reply of the
# asked size: a claim returns the run's events, a write returns little.
SOURCE = """
redis.call('HSET', KEYS[1], 'status', ARGV[1])
redis.call('SADD', KEYS[2], KEYS[1])
redis.call('INCR', KEYS[3])
return string.rep('e', tonumber(ARGV[2]))
"""
CLAIM_REPLY = 500  # bytes: the events a claim of a bench run returns (README: 503-557)
WRITE_PAYLOAD = 300  # bytes: a checkpoint's or an APPLY's encoded events
WRITE_REPLY = 8


def _args(payload: int, reply: int) -> tuple[bytes, str]:
    return b"v" * payload, str(reply)


# The five calls of a lifecycle, split by task, as their script arguments (made once: the
# floor's own allocations would count as the transport's): the start's claim, checkpoint
# and suspension; the resume's claim and completion.
CLAIM, WRITE = _args(40, CLAIM_REPLY), _args(WRITE_PAYLOAD, WRITE_REPLY)
START = (CLAIM, WRITE, WRITE)
RESUME = (CLAIM, WRITE)
CALLS_PER_LIFECYCLE = len(START) + len(RESUME)
SHAPES = ("tasks", "batch")
FIGURES = ("lifecycles_per_s", "cpu_us_per_lifecycle", "redis_cpu_us_per_lifecycle")


def _keys(index: int) -> list[str]:
    return [f"bench:floor:run:{index}", f"bench:floor:active:{index % 16}", "bench:floor:n"]


async def _tasks(script: Script, n: int, concurrency: int) -> None:
    """One task per execution, each call awaited through the batcher."""

    async def execution(index: int, calls: Sequence[tuple[bytes, str]]) -> None:
        keys = _keys(index)
        for args in calls:
            await script(keys=keys, args=args)

    async def lifecycle(index: int) -> None:
        await asyncio.create_task(execution(index, START))
        await asyncio.create_task(execution(index, RESUME))

    await bounded(range(n), lifecycle, concurrency)


async def _batch(script: Script, batcher: Batcher, n: int, concurrency: int) -> None:
    """``concurrency`` runs at a time, each call for the whole batch in one round trip."""
    for first in range(0, n, concurrency):
        runs = range(first, min(n, first + concurrency))
        for calls in (START, RESUME):
            for args in calls:
                replies = await batcher.commands(
                    [("EVALSHA", script.sha, 3, *_keys(r), *args) for r in runs]
                )
                for r in replies:
                    if isinstance(r, Exception):
                        raise r


async def _forget(client: aioredis.Redis) -> None:
    """The floor's keys only: with ``--redis`` the server may hold other data."""
    found = [key async for key in client.scan_iter(match="bench:floor:*", count=1000)]
    for first in range(0, len(found), 1000):
        await client.delete(*found[first : first + 1000])


async def _redis_cpu_s(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def _measure(
    client: aioredis.Redis, body: Callable[[int], Awaitable[None]], n: int
) -> dict[str, float]:
    await body(min(n, 500))  # warm: connections, the script cache, the loop's free lists
    redis_before = await _redis_cpu_s(client)
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    await body(n)
    cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
    redis_cpu = await _redis_cpu_s(client) - redis_before
    # every call ran once, or the figures are not a lifecycle's (each call INCRs once)
    calls = int(await client.get("bench:floor:n") or 0)
    return {
        "calls": calls,
        "calls_expected": (min(n, 500) + n) * CALLS_PER_LIFECYCLE,
        "lifecycles_per_s": round(n / wall),
        "cpu_us_per_lifecycle": round(cpu / n * 1e6, 1),
        "redis_cpu_us_per_lifecycle": round(redis_cpu / n * 1e6, 1),
    }


async def run_floor(args: argparse.Namespace) -> dict[str, Any]:
    async with bench_redis(args) as url:
        # as the store's client: a socket timeout, so the batcher reads under one timeout
        client = aioredis.Redis.from_url(url, socket_timeout=10)
        try:
            batcher = Batcher(client, pipelined=True)
            script = Script(batcher, SOURCE)
            await client.script_load(SOURCE)
            await _forget(client)  # a --redis server may keep an interrupted run's keys
            bodies: dict[str, Callable[[int], Awaitable[None]]] = {
                "tasks": lambda n: _tasks(script, n, args.concurrency),
                "batch": lambda n: _batch(script, batcher, n, args.concurrency),
            }
            samples: dict[str, list[dict[str, float]]] = {s: [] for s in args.shapes}
            for _ in range(args.repeats):  # interleaved: a change of the machine's speed
                for shape in args.shapes:  # moves both shapes alike
                    samples[shape].append(await _measure(client, bodies[shape], args.runs))
                    await _forget(client)
            loop = describe(asyncio.get_running_loop())
        finally:
            await client.aclose()
    medians = {
        shape: {k: statistics.median(s[k] for s in runs) for k in FIGURES}
        for shape, runs in samples.items()
    }
    problems = [
        f"{shape}: {s['calls']} script calls ran, {s['calls_expected']} were made"
        for shape, runs in samples.items()
        for s in runs
        if s["calls"] != s["calls_expected"]
    ]
    result: dict[str, Any] = {
        "bench": "floor", "runs": args.runs, "repeats": args.repeats, "loop": loop,
        "concurrency": args.concurrency, "calls_per_lifecycle": CALLS_PER_LIFECYCLE,
        "load_avg": load_average(), "samples": samples, "median": medians, "problems": problems,
    }  # fmt: skip
    rows: list[Row] = []
    for shape, m in medians.items():
        each = " / ".join(f"{s['cpu_us_per_lifecycle']:.0f}" for s in samples[shape])
        rows += [
            (f"{shape}: lifecycles/s", f"{m['lifecycles_per_s']:,.0f}", "", ""),
            (f"{shape}: CPU µs per lifecycle, this process", f"{m['cpu_us_per_lifecycle']:.0f}"
             f" ({each})", "", ""),
            (f"{shape}: CPU µs per lifecycle, redis-server",
             f"{m['redis_cpu_us_per_lifecycle']:.0f}", "", ""),
        ]  # fmt: skip
    notes = [
        *problems,
        f"{CALLS_PER_LIFECYCLE} script calls per lifecycle (a worker's share), {args.runs} "
        f"lifecycles, {args.concurrency} in flight, {loop}, median of {args.repeats}",
        "no engine: a worker's CPU per lifecycle in bench.hitl less 'tasks' is the engine's",
    ]
    if getattr(args, "print", True):
        print_report("the transport's floor, per lifecycle", rows, notes, result)
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    p.add_argument("--runs", type=int, default=20_000, help="lifecycles per sample")
    p.add_argument("--repeats", type=int, default=3, help="samples per shape (median)")
    p.add_argument("--concurrency", type=int, default=64, help="lifecycles in flight")
    p.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    p.add_argument("--redis", help="Redis URL; default: start a private redis-server")
    p.add_argument("--redis-arg", action="append", default=[], help="redis-server argument")
    args = p.parse_args(argv)
    if args.runs < 1 or args.repeats < 1 or args.concurrency < 1:
        p.error("--runs, --repeats and --concurrency must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(run_floor(args))
    return 0 if not result["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())

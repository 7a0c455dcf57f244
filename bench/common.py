"""Helpers shared by the benchmark modes: the bench environment (Redis, workers, runtime,
observer), bounded concurrency, condition waits, percentiles and the report table."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from runtime import Runtime
from runtime.ids import make_token
from runtime.store.redis import RedisStore, keys
from runtime.testing import WorkerProcess

from .harness import Observer, start_redis, start_workers

HOOK_ID = "converse-0.answer.0"  # step "converse", hook "answer", first round
T = TypeVar("T")


def token_of(run_id: str) -> str:
    return make_token(run_id, HOOK_ID)


@dataclass
class Env:
    url: str
    own_redis: bool
    rt: Runtime
    observer: Observer
    workers: list[WorkerProcess]
    driver_round_trips: Counter[str]
    partitions: int

    @property
    def worker_pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    async def suspended(self) -> int:
        """Pending hooks over all partitions: a bench run's hook enters the pending set in
        the same script that records its suspension."""
        pending = [keys.key("pending", p) for p in range(self.partitions)]
        return await self.observer.sum_of("SCARD", pending)

    async def all_compacted(self, run_ids: list[str]) -> bool:
        """Whether no run of ``run_ids`` has its event stream any more: an ended run is
        compacted a few seconds after its end (runtime/store/redis/_compaction.py). One
        EXISTS per run: callers poll it every 0.5 s, not at the 20 ms of other waits."""
        streams = [keys.run_keys(r, self.partitions).events for r in run_ids]
        for first in range(0, len(streams), 1000):
            if await self.observer.sum_of("EXISTS", streams[first : first + 1000]):
                return False
        return True

    async def queued(self) -> int:
        """Tasks not yet finished (a task is XDEL'd when its execution suspends or ends)."""
        return await self.observer.sum_of(
            "XLEN", [keys.key("tasks", p) for p in range(self.partitions)]
        )

    async def run_events(self, run_ids: list[str], batch: int = 1000) -> list[list[Any]]:
        """Each run's raw event entries [(id, {b't': type, b'd': data}), ...]."""
        out: list[list[Any]] = []
        for i in range(0, len(run_ids), batch):
            chunk = run_ids[i : i + batch]
            replies = await self.observer.pipeline(
                [("XRANGE", keys.run_keys(r, self.partitions).events, "-", "+") for r in chunk]
            )
            # a run compacted a few seconds after its end has its log in its archive
            # (runtime/store/redis/_compaction.py): read it through the store
            compacted = [r for r, entries in zip(chunk, replies, strict=True) if not entries]
            logs = await asyncio.gather(*(self.rt.store.events(r) for r in compacted))
            archived = {
                r: [
                    (e.id.encode(), {b"t": e.type.encode(), b"d": orjson.dumps(e.data)})
                    for e in log
                ]
                for r, log in zip(compacted, logs, strict=True)
                if log
            }
            out += [archived.get(r, entries) for r, entries in zip(chunk, replies, strict=True)]
        return out


def _count_round_trips(rt: Runtime) -> Counter[str]:
    counts: Counter[str] = Counter()
    store = rt.store
    assert isinstance(store, RedisStore)
    client = store.client
    original: Any = client.execute_command

    async def execute_command(*args: Any, **options: Any) -> Any:
        counts[str(args[0]).upper()] += 1
        return await original(*args, **options)

    client.execute_command = execute_command  # type: ignore[method-assign]
    batcher = store.scripts.batcher
    original_pipeline: Any = batcher._pipeline

    async def pipeline(calls: list[Any]) -> list[Any]:
        # The batcher writes its batches itself (runtime/store/redis/_batch.py): a lone
        # call is one EVALSHA round trip, a larger batch one pipeline.
        counts["EVALSHA" if len(calls) == 1 else "PIPELINE:work"] += 1
        result: list[Any] = await original_pipeline(calls)
        return result

    batcher._pipeline = pipeline  # type: ignore[method-assign]
    return counts


@asynccontextmanager
async def bench_redis(args: argparse.Namespace) -> AsyncIterator[str]:
    """The URL of ``--redis``, or of a private redis-server (with ``--redis-arg``s) that is
    stopped on exit."""
    if args.redis:
        yield str(args.redis)
        return
    server = start_redis(args.redis_arg)
    try:
        yield server.url
    finally:
        server.stop()


@asynccontextmanager
async def bench_env(args: argparse.Namespace) -> AsyncIterator[Env]:
    """Redis (private unless ``--redis``), the driver's runtime and K worker processes, as
    the command line asks (``--workers``, ``--partitions``, ``--worker-concurrency``,
    ``--lease``, ``--redis-arg``)."""
    redis_url: str | None = args.redis
    workers: int = args.workers
    partitions: int = args.partitions
    concurrency: int = args.worker_concurrency
    lease: float = args.lease
    server = start_redis(args.redis_arg) if redis_url is None else None
    url = server.url if server is not None else str(redis_url)
    procs: list[WorkerProcess] = []
    try:
        rt = await Runtime(url, partitions=partitions, lease_seconds=lease).connect()
        try:
            procs = start_workers(
                url, workers, partitions=partitions, concurrency=concurrency, lease=lease
            )
            pids = {"driver": os.getpid(), **{f"worker{i}": w.pid for i, w in enumerate(procs)}}
            if server is not None:
                pids["redis"] = server.pid
            observer = Observer(url, pids)
            try:
                yield Env(
                    url, server is not None, rt, observer, procs, _count_round_trips(rt),
                    partitions,
                )  # fmt: skip
            finally:
                await observer.close()
        finally:
            for w in procs:
                w.stop()
            await rt.close()
    finally:
        if server is not None:
            server.stop()


async def bounded(items: Iterable[T], fn: Callable[[T], Awaitable[Any]], concurrency: int) -> None:
    """Run ``fn`` over ``items`` with at most ``concurrency`` calls in flight."""
    it = iter(items)

    async def runner() -> None:
        for item in it:
            await fn(item)

    await asyncio.gather(*(runner() for _ in range(concurrency)))


async def wait_for(
    condition: Callable[[], Awaitable[bool]], timeout: float, what: str, every: float = 0.02
) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(every)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def pcts(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3) if values else math.nan,
        "n": len(values),
    }


Row = tuple[str, str, str, str]  # figure, value, target, verdict


def verdict(ok: bool | None) -> str:
    return "" if ok is None else ("met" if ok else "MISSED")


def print_report(title: str, rows: list[Row], notes: list[str], result: dict[str, Any]) -> None:
    widths = [max(len(r[i]) for r in [("figure", "value", "target", ""), *rows]) for i in range(4)]
    print(f"\n== {title} ==")
    header = ("figure", "value", "target", "")
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for note in notes:
        print(f"note: {note}")
    print(orjson.dumps(result, option=orjson.OPT_SORT_KEYS).decode(), flush=True)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]

"""The store's clock (runtime/store/redis/_time.py): Redis' TIME, read once per resync
period for every caller and carried forward with the monotonic clock."""

from __future__ import annotations

import asyncio
import time

import pytest

from runtime import Runtime
from runtime.store.redis import _time
from tests.raw_redis import raw


async def test_the_store_clock_is_redis_clock(redis_url: str) -> None:
    async with Runtime(redis_url, partitions=4) as rt:
        store = raw(rt)
        seconds, micros = await store.client.time()
        redis_ms = seconds * 1000 + micros // 1000
        assert abs(await store.now_ms() - redis_ms) < 50


async def test_one_read_for_concurrent_callers_and_a_resync_after_the_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads = 0
    redis_seconds = 1_000_000  # far from this machine's clock: only Redis' counts

    async def read_time() -> tuple[int, int]:
        nonlocal reads
        reads += 1
        await asyncio.sleep(0.01)
        return redis_seconds, 500_000

    clock = _time.RedisTime(read_time)
    stamps = await asyncio.gather(*(clock.now_ms() for _ in range(20)))
    assert reads == 1
    assert all(1_000_000_500 <= s < 1_000_000_600 for s in stamps)
    await asyncio.sleep(0.05)
    assert 1_000_000_540 <= await clock.now_ms() < 1_000_000_700  # carried forward
    assert reads == 1
    monkeypatch.setattr(_time, "RESYNC_SECONDS", 0.0)
    redis_seconds = 2_000_000
    assert await clock.now_ms() >= 2_000_000_500
    assert reads == 2


async def test_a_failed_read_fails_every_waiting_caller_and_the_next_call_reads_again() -> None:
    attempts = 0

    async def read_time() -> tuple[int, int]:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0.01)
        if attempts == 1:
            raise ConnectionError("Redis is restarting")
        return int(time.time()), 0

    clock = _time.RedisTime(read_time)
    results = await asyncio.gather(*(clock.now_ms() for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    assert await clock.now_ms() > 0
    assert attempts == 2


async def test_a_cancelled_caller_does_not_cancel_the_read_the_others_wait_for() -> None:
    """The caller that started a resync is cancelled (an execution stopped) while another
    waits for the same read (a worker's heartbeat loop): the read goes on and the other
    caller gets the time. Before, the cancellation reached every waiter."""
    started = asyncio.Event()

    async def read_time() -> tuple[int, int]:
        started.set()
        await asyncio.sleep(0.05)
        return 1_000_000, 0

    clock = _time.RedisTime(read_time)
    first = asyncio.create_task(clock.now_ms())
    await started.wait()
    second = asyncio.create_task(clock.now_ms())
    await asyncio.sleep(0)
    first.cancel()
    assert 1_000_000_000 <= await asyncio.wait_for(second, 5) < 1_000_000_100
    with pytest.raises(asyncio.CancelledError):
        await first

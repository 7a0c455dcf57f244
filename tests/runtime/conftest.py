"""Fixtures of the tests that drive real worker processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from runtime import Runtime
from tests.processes import PARTITIONS, WorkerProcess


@pytest.fixture
async def prt(redis_url: str) -> AsyncIterator[Runtime]:
    """A runtime with the partition count the worker processes use."""
    async with Runtime(redis_url, partitions=PARTITIONS) as runtime:
        yield runtime


@pytest.fixture
def sync_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """Worker processes a test starts; stopped at the end whatever happened."""
    started: list[WorkerProcess] = []
    yield started
    for proc in started:
        proc.stop()

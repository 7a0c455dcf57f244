"""Shared fixtures: the backends (embedded and real Redis) and runtimes on them.

Real-Redis tests use ``$PARLEY_TEST_REDIS`` (default db 9 of the local server); the db is
flushed before and after each test, so each test leaves Redis as it found it (empty).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis

from examples import trace
from runtime import Runtime, Worker

REDIS_URL = os.environ.get("PARLEY_TEST_REDIS", "redis://127.0.0.1:6379/9")


def _flush_real_redis() -> None:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.flushdb()
    finally:
        client.close()


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A real Redis database, empty at start and flushed at the end."""
    try:
        _flush_real_redis()
    except redis.ConnectionError:
        pytest.fail(f"the real Redis at {REDIS_URL} is not reachable")
    yield REDIS_URL
    _flush_real_redis()


@pytest.fixture(params=["memory", "redis"])
def backend_url(request: pytest.FixtureRequest) -> str:
    """Each test using it runs against the embedded store and against real Redis."""
    if request.param == "memory":
        return f"memory://{uuid.uuid4().hex}"
    url: str = request.getfixturevalue("redis_url")
    return url


@pytest.fixture
def demo_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demos count what their agents did in this file (``examples.trace``); worker
    and server processes started by the test inherit it."""
    path = tmp_path / "demo-trace.jsonl"
    monkeypatch.setenv(trace.ENV, str(path))
    return path


@pytest.fixture
async def rt(backend_url: str) -> AsyncIterator[Runtime]:
    async with Runtime(backend_url, partitions=4) as runtime:
        yield runtime


@pytest.fixture
def worker(rt: Runtime) -> Worker:
    return Worker(rt, timer_tick=0.01)

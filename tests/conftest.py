"""Shared fixtures: the backends (embedded and real Redis) and runtimes on them.

The real Redis of the tests is the session's own: a private ``redis-server`` on a free
port, started when the first test needs it and stopped at the end, so the suite never
touches a Redis it did not start. ``$PARLEY_TEST_REDIS`` names another database instead;
the session then takes it only if it is empty (it refuses a database with keys in it), so
what it flushes around each test is what the tests wrote. Either way each test starts on
an empty database and leaves it empty.
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
from tests.redis_servers import RedisServer

# Read once, before anything of the session could set it: a URL given from outside.
GIVEN_REDIS_URL = os.environ.get("PARLEY_TEST_REDIS") or None


def _flush(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def _claim_given_database(url: str) -> None:
    """The given database becomes the session's only if it is empty: the fixtures flush
    it around each test, which must not delete anybody else's data."""
    client = redis.Redis.from_url(url)
    try:
        keys = client.dbsize()
    except redis.ConnectionError as exc:
        pytest.exit(f"PARLEY_TEST_REDIS={url}: that Redis is not reachable ({exc})", 4)
    finally:
        client.close()
    if keys:
        pytest.exit(
            f"PARLEY_TEST_REDIS={url}: that database is not empty ({keys} keys). The tests "
            "flush the database they use after each test, so they take only an empty one: "
            "name an empty database, or unset PARLEY_TEST_REDIS and the tests start their "
            "own redis-server.",
            4,
        )


def pytest_configure(config: pytest.Config) -> None:
    processes = config.getoption("numprocesses", default=None)
    if GIVEN_REDIS_URL is not None and processes not in (None, 0):
        # Each test process flushes the database around its tests: processes sharing one
        # would delete each other's data mid-test.
        raise pytest.UsageError(
            f"PARLEY_TEST_REDIS={GIVEN_REDIS_URL} names one database, and -n {processes} "
            "would run the tests in several processes sharing it: add -n 0, or unset "
            "PARLEY_TEST_REDIS so that each process starts its own redis-server."
        )


@pytest.fixture(scope="session")
def session_redis_url() -> Iterator[str]:
    """The session's Redis database: ``$PARLEY_TEST_REDIS`` if given (and empty), else a
    private redis-server started now (once per session) and stopped at the end."""
    if GIVEN_REDIS_URL is not None:
        _claim_given_database(GIVEN_REDIS_URL)
        yield GIVEN_REDIS_URL
        return
    try:
        server = RedisServer("--appendonly", "no")
    except (OSError, RuntimeError) as exc:
        pytest.exit(
            f"the tests start their own redis-server, which failed ({exc}): install Redis "
            "(apt-get install redis-server) or set PARLEY_TEST_REDIS to an empty database",
            4,
        )
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_url(session_redis_url: str) -> Iterator[str]:
    """A real Redis database, empty at start and flushed at the end."""
    _flush(session_redis_url)
    yield session_redis_url
    _flush(session_redis_url)


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

"""Fixtures of the tests that drive real worker processes."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from runtime import Runtime
from runtime.errors import StoreUnavailable
from runtime.store.redis._calls import OUTAGE
from runtime.store.redis._executions import ExecutionStore
from tests.faults import Proxy
from tests.processes import PARTITIONS, WorkerProcess


class EventCountCheck:
    """What :func:`exact_event_counts` checked in one test."""

    def __init__(self) -> None:
        self.checked = 0
        self.drifted: list[str] = []


@pytest.fixture(autouse=True)
def exact_event_counts(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[EventCountCheck]:
    """Every APPLY an in-process worker sends with ``known_count`` is checked against the
    run: the count must be the run's own (``nev``) less the events after ``after``. APPLY
    does not read what arrived when the run's count equals it (lua/apply.lua), so a count
    that drifted could hide an answer and strand the run; checked here across every
    workflow these tests run, faults and races included. Not in the tests that count the
    commands Redis executes (marked ``counts_commands``): the check adds its own."""
    check = EventCountCheck()
    if request.node.get_closest_marker("counts_commands") is not None:
        yield check
        return
    original = ExecutionStore.apply

    async def read(self: ExecutionStore, run_id: str, after: str) -> int:
        keys = self._run(run_id)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hget(keys.run, "nev")
            pipe.xrange(keys.events, f"({after}", "+")
            nev, later = await pipe.execute()
        return int(nev or 0) - len(later)

    async def checked(
        self: ExecutionStore, run_id: str, fence: str, after: str, *args: Any, **kwargs: Any
    ) -> Any:
        known = kwargs.get("known_count")
        if known is not None:
            try:
                # In a context of its own, as the store's own calls run: a task the client
                # makes in the execution's context is taken for one of the workflow's (a
                # first()'s branch noted it as a call after its receive, and kept a
                # message nothing used: the model-based test's seed 36).
                loop = asyncio.get_running_loop()
                reading = contextvars.Context().run(loop.create_task, read(self, run_id, after))
                expected = await reading
            except (*OUTAGE, StoreUnavailable):  # an outage the test injects: so does APPLY
                expected = known
            else:
                check.checked += 1
            if expected != known:
                check.drifted.append(
                    f"{run_id}: told {known} events up to {after}, the run {expected}"
                )
        return await original(self, run_id, fence, after, *args, **kwargs)

    monkeypatch.setattr(ExecutionStore, "apply", checked)
    yield check
    assert not check.drifted, check.drifted


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


@pytest.fixture
async def proxy(redis_url: str) -> AsyncIterator[Proxy]:
    """A TCP proxy to the test's Redis (tests.faults.Proxy): replies held back, dropped or
    delayed, connections cut."""
    parts = urlsplit(redis_url)
    p = Proxy(parts.hostname or "127.0.0.1", parts.port or 6379)
    await p.start()
    yield p
    await p.close()

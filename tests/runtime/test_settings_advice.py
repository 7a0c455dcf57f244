"""A worker tells the operator once when a Redis setting Parley recommends is not in
effect; a Redis that refuses CONFIG (managed offerings often do) gets no advice and no
failure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from runtime import Runtime, Worker
from tests.helpers import running


@pytest.fixture
def evicting_redis(redis_url: str) -> Iterator[str]:
    client = redis.Redis.from_url(redis_url)
    client.config_set("maxmemory", "1gb")
    client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        yield redis_url
    finally:
        client.config_set("maxmemory", "0")
        client.config_set("maxmemory-policy", "noeviction")
        client.close()


async def test_a_worker_warns_once_of_an_evicting_policy(
    evicting_redis: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with Runtime(evicting_redis, partitions=2) as rt:
        advice = await rt.store.settings_advice()
        assert [(s, v, w) for s, v, w, _ in advice] == [
            ("maxmemory-policy", "allkeys-lru", "noeviction")
        ]
        worker = Worker(rt, timer_tick=0.01)
        async with running(worker):
            await worker.ready.wait()
        await worker._advise()  # a second start in the same process says nothing more
    warnings = [r for r in caplog.records if "maxmemory-policy" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"
    text = worker.metrics.registry.get_sample_value(
        "parley_redis_setting_not_recommended", {"setting": "maxmemory-policy"}
    )
    assert text == 1


async def test_no_limit_or_noeviction_needs_no_advice(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        client.config_set("maxmemory-policy", "allkeys-lru")  # no maxmemory: never evicts
        async with Runtime(redis_url, partitions=2) as rt:
            assert await rt.store.settings_advice() == []
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1gb")
        async with Runtime(redis_url, partitions=2) as rt:
            assert await rt.store.settings_advice() == []
    finally:
        client.config_set("maxmemory", "0")
        client.config_set("maxmemory-policy", "noeviction")
        client.close()


async def test_a_redis_that_refuses_config_gets_no_advice(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.acl_setuser(
        "noconfig",
        enabled=True,
        passwords=["+pw"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-config"],
    )
    client.config_set("maxmemory", "1gb")
    client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        url = redis_url.replace("redis://", "redis://noconfig:pw@", 1)
        async with Runtime(url, partitions=2) as rt:
            assert await rt.store.settings_advice() == []
            worker = Worker(rt, timer_tick=0.01)
            async with running(worker):
                await worker.ready.wait()
    finally:
        client.acl_deluser("noconfig")
        client.config_set("maxmemory", "0")
        client.config_set("maxmemory-policy", "noeviction")
        client.close()


async def test_the_embedded_store_gets_no_advice() -> None:
    async with Runtime("memory://advice", partitions=2) as rt:
        assert await rt.store.settings_advice() == []

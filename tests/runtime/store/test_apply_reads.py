"""APPLY reads a run's log only when something may have arrived: told how many events the
log holds up to the last one the execution saw (``known_count``), it compares that with the
run's own count and skips the XRANGE when they are equal (lua/apply.lua). Counted by
Redis' INFO commandstats on the session's real redis-server, never timed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from runtime import Runtime
from runtime.store import ApplyOutcome, ResumeOutcome, Writes

from .test_contract import (
    MAX_EVENTS,
    RETENTION,
    answer,
    claim,
    hook_writes,
    start,
    suspend,
    task_of,
)

# counts_commands: the suite's event count check (tests/runtime/conftest.py) adds commands
pytestmark = [pytest.mark.redis, pytest.mark.counts_commands]


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def xranges(client: redis.Redis) -> int:
    stat = client.info("commandstats").get("cmdstat_xrange")
    return 0 if stat is None else int(stat["calls"])


async def test_apply_reads_the_log_only_when_the_count_says_something_arrived(
    redis_url: str, client: redis.Redis
) -> None:
    async with Runtime(redis_url, partitions=2) as rt:
        store = rt.store
        run_id = await start(store)
        task = await task_of(store, run_id)
        claimed = await claim(store, task)
        writes = hook_writes(run_id, "h0.a")
        known = claimed.event_count + writes.event_count

        client.config_resetstat()
        applied = await store.apply(
            run_id, claimed.fence, claimed.events[-1].id, writes,
            max_events=MAX_EVENTS, retention_seconds=RETENTION, known_count=claimed.event_count,
        )  # fmt: skip
        assert applied.outcome is ApplyOutcome.OK and applied.last_id is not None
        assert xranges(client) == 0  # nothing arrived: the log was not read

        # Without a count the store cannot tell: it reads (what the contract suite covers).
        client.config_resetstat()
        unknown = await store.apply(
            run_id, claimed.fence, applied.last_id, Writes(),
            max_events=MAX_EVENTS, retention_seconds=RETENTION,
        )  # fmt: skip
        assert (unknown.outcome, unknown.arrived) == (ApplyOutcome.OK, [])
        assert xranges(client) == 1

        resumed = await store.resume(
            answer(run_id, "h0.a", "yes"), max_events=MAX_EVENTS, retention_seconds=RETENTION
        )
        assert resumed.outcome is ResumeOutcome.RECORDED
        client.config_resetstat()
        refused = await store.apply(
            run_id, claimed.fence, applied.last_id, Writes(), suspension=suspend("h0.a"),
            max_events=MAX_EVENTS, retention_seconds=RETENTION, known_count=known,
        )  # fmt: skip
        assert refused.outcome is ApplyOutcome.REFUSED
        assert [e.type for e in refused.arrived] == ["hook.received"]
        assert xranges(client) == 1  # the count differed: the log was read

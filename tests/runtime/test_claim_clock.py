"""An execution's clock is the store's, carried forward from the instant the store's clock
was read for its claim: a claim whose reply comes back late (a Redis stall, an fsync on a
slow disk, a congested link) does not bring the deadlines the execution sets forward."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlsplit

import pytest

from runtime import Runtime, Worker, hook, sleep, workflow
from runtime.store.redis import script_source
from tests.faults import Proxy

TIMEOUT_S = 6.0
STALL_S = 1.5
# what may pass between the deadline's computation and its write's arrival in Redis, on a
# loaded machine: far less than the stall
SLACK_MS = 500


@workflow(name="claim_clock_hook_wf")
async def claim_clock_hook_wf() -> Any:
    return await hook("answer", timeout=TIMEOUT_S)


@workflow(name="claim_clock_sleep_wf")
async def claim_clock_sleep_wf() -> None:
    await sleep(TIMEOUT_S)


def _deadline_after_its_write_ms(events: list[Any]) -> int:
    """How long after its event reached Redis (the entry id's time) the deadline is."""
    for event in events:
        if event.type == "hook.created":
            return int(event.data["expires_at"]) - event.timestamp_ms
        if event.type == "timer.scheduled":
            return int(event.data["due"]) - event.timestamp_ms
    raise AssertionError(f"no deadline in {[e.type for e in events]}")


@pytest.mark.parametrize("wf", [claim_clock_hook_wf, claim_clock_sleep_wf], ids=["hook", "sleep"])
async def test_a_claim_whose_reply_was_late_sets_deadlines_on_time(
    redis_url: str, proxy: Proxy, wf: Any
) -> None:
    """Before, the execution paired the store's time read before the claim with this
    process's clock read after its reply: its clock stayed behind Redis' by the reply's
    delay, and a 6 s timeout set in it expired ~1.5 s early."""
    db = urlsplit(redis_url).path
    async with (
        Runtime(redis_url, partitions=4) as direct,
        Runtime(f"redis://127.0.0.1:{proxy.port}{db}", partitions=4) as via_proxy,
    ):
        run_id = await direct.start(wf)
        proxy.hold_replies_to = hashlib.sha1(script_source("claim").encode()).hexdigest().encode()
        proxy.hold_seconds = STALL_S
        await Worker(via_proxy, timer_tick=0.01).drain()
        events = list(await direct.events(run_id))
        assert any(e.type in ("hook.created", "timer.scheduled") for e in events), events
        assert _deadline_after_its_write_ms(events) >= TIMEOUT_S * 1000 - SLACK_MS

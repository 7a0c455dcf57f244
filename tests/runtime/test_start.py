"""Starting runs: the caller's own id, idempotency keys (also when the first start's reply
was lost), and absolute deadlines."""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import urlsplit

import pytest

from runtime import (
    STEP_HOOK_TIMEOUT,
    RunStatus,
    Runtime,
    StoreUnavailable,
    UsageError,
    Worker,
    hook,
    sleep_until,
    workflow,
)
from runtime.store.redis import script_source
from tests.faults import Proxy


@workflow(name="start_wf")
async def start_wf(x: int) -> int:
    answer = await hook("go")
    return int(x) + int(answer)


async def finish(rt: Runtime, worker: Worker, run_id: str, answer: int) -> object:
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    await rt.resume_hook(pending.token, answer)
    await worker.drain()
    return await rt.wait(run_id, timeout=5)


async def test_a_run_can_have_the_callers_own_id(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(start_wf, 1, run_id="order-42.v1")
    assert run_id == "order-42.v1"
    assert await rt.start(start_wf, 99, run_id="order-42.v1") == run_id  # nothing new
    assert (await rt.stats())["started"] == 1
    assert await finish(rt, worker, run_id, 2) == 3  # the first start's input


@pytest.mark.parametrize("bad", ["", "has:colon", "x" * 101, "-leading", "spa ce", 42])
async def test_a_malformed_run_id_is_refused(rt: Runtime, bad: object) -> None:
    with pytest.raises(UsageError, match="a run id is 1 to 100"):
        await rt.start(start_wf, 1, run_id=bad)  # type: ignore[arg-type]
    assert (await rt.stats())["started"] == 0


async def test_concurrent_starts_with_one_key_create_one_run(rt: Runtime, worker: Worker) -> None:
    ids = await asyncio.gather(*(rt.start(start_wf, 5, idempotency_key="pay-7") for _ in range(50)))
    assert len(set(ids)) == 1
    assert (await rt.stats())["started"] == 1
    assert len(await rt.list_runs()) == 1
    assert await finish(rt, worker, ids[0], 1) == 6
    other = await rt.start(start_wf, 5, idempotency_key="pay-8")
    assert other != ids[0]


async def test_an_idempotent_start_of_a_session_run_stays_in_the_session(rt: Runtime) -> None:
    session = Runtime.new_session_id()
    first = await rt.start(start_wf, 1, session=session, idempotency_key="k")
    assert await rt.start(start_wf, 1, session=session, idempotency_key="k") == first
    assert rt.store.fits_session(first, session)
    with pytest.raises(UsageError, match="idempotency key is a string"):
        await rt.start(start_wf, 1, idempotency_key="")
    with pytest.raises(UsageError, match="not both"):
        await rt.start(start_wf, 1, run_id="a", idempotency_key="b")


async def test_a_start_whose_reply_was_lost_is_not_started_twice(
    redis_url: str, proxy: Proxy
) -> None:
    """The case of a client that got a 503 after its start was recorded: retried with the
    same key, it gets the run that exists, and nothing runs twice."""
    db = urlsplit(redis_url).path
    async with (
        Runtime(f"redis://127.0.0.1:{proxy.port}{db}", partitions=4) as via_proxy,
        Runtime(redis_url, partitions=4) as direct,
    ):
        proxy.replies.clear()  # Redis executes the start; its reply is held back
        attempt = asyncio.create_task(via_proxy.start(start_wf, 1, idempotency_key="lost"))
        deadline = time.monotonic() + 5
        while not (await direct.stats())["started"]:
            assert time.monotonic() < deadline, "the start never reached Redis"
            await asyncio.sleep(0.01)
        proxy.cut()  # the connection dies before the reply
        with pytest.raises(StoreUnavailable):
            await attempt
        proxy.replies.set()
        retried = await via_proxy.start(start_wf, 1, idempotency_key="lost")
        assert [r.run_id for r in await direct.list_runs()] == [retried]
        assert (await direct.stats())["started"] == 1


async def test_a_chat_message_whose_start_did_not_reach_redis_is_not_shown(
    redis_url: str, proxy: Proxy
) -> None:
    """start_with_message writes the visitor's message and the run in one step. Before, the
    message was posted by a call of its own first: when the start's call was lost (Redis
    gone between the two), the message stayed shown with no run, and the page's retry
    (its client id, so the same idempotency key) found no run and posted it again."""
    db = urlsplit(redis_url).path
    session = "session-start-lost-0001"
    visitor = {"type": "visitor", "text": "hello", "client_id": "c1"}
    start_sha = hashlib.sha1(script_source("start").encode()).hexdigest().encode()
    async with (
        Runtime(f"redis://127.0.0.1:{proxy.port}{db}", partitions=4) as via_proxy,
        Runtime(redis_url, partitions=4) as direct,
    ):
        proxy.drop_requests_with = start_sha  # the start's script never reaches Redis
        with pytest.raises(StoreUnavailable):
            await via_proxy.start_with_message(
                session, visitor, start_wf, 1, idempotency_key="chat:c1"
            )
        assert await direct.read_outbox(session) == []
        assert await direct.list_runs() == []
        proxy.drop_requests_with = None
        run_id = await via_proxy.start_with_message(
            session, visitor, start_wf, 1, idempotency_key="chat:c1"
        )
        assert [m for _id, m in await direct.read_outbox(session)] == [visitor]
        assert [r.run_id for r in await direct.list_runs()] == [run_id]


@workflow(name="absolute_deadline_wf")
async def absolute_deadline_wf(when: str) -> object:
    answer = await hook("answer_by", timeout=datetime.fromisoformat(when), on_timeout="return")
    return "timed out" if answer is STEP_HOOK_TIMEOUT else answer


async def test_a_datetime_timeout_fires_at_that_instant_not_before(
    rt: Runtime, worker: Worker
) -> None:
    paris = timezone(timedelta(hours=1))
    when = datetime.now(paris) + timedelta(seconds=1)
    run_id = await rt.start(absolute_deadline_wf, when.isoformat())
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    assert pending.expires_at == pytest.approx(when.timestamp(), abs=0.001)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED  # not early
    while time.time() < when.timestamp():
        await asyncio.sleep(0.05)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "timed out"
    expired = [e for e in await rt.events(run_id) if e.type == "hook.expired"]
    assert int(expired[0].id.split("-")[0]) >= int(when.timestamp() * 1000)


@workflow(name="naive_wf")
async def naive_wf() -> object:
    return await hook("x", timeout=datetime(2030, 1, 1, 17, 0))


@workflow(name="sleep_until_wf")
async def sleep_until_wf(when: str) -> str:
    await sleep_until(datetime.fromisoformat(when))
    return "woke"


async def test_a_naive_datetime_is_refused_and_sleep_until_waits(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(naive_wf)
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED and info.error is not None
    assert "naive datetime" in info.error["message"] and "time zone" in info.error["message"]
    when = datetime.now(UTC) + timedelta(milliseconds=300)
    sleeper = await rt.start(sleep_until_wf, when.isoformat())
    await worker.drain()
    assert (await rt.get_run(sleeper)).status is RunStatus.SUSPENDED
    while time.time() < when.timestamp():
        await asyncio.sleep(0.02)
    await worker.drain()
    assert await rt.wait(sleeper, timeout=5) == "woke"

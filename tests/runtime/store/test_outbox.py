"""A session's outbox is bounded and expires, whoever writes it (issue 13, item 9): every
writer trims it to about ``OUTBOX_MAXLEN`` messages and makes it expire ``retention``
after its latest message, except while one of the session's prompts is pending."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime import RunStatus, Runtime, Worker, emit, sleep, step, step_hook, workflow
from runtime.settings import OUTBOX_MAXLEN
from tests.helpers import running
from tests.raw_redis import raw

RETENTION = "2h"
RETENTION_SECONDS = 7200
# Approximate trimming (MAXLEN ~) drops whole stream nodes only: 100 entries each, the
# default stream-node-max-entries.
SLACK = 100
MORE_THAN_KEPT = OUTBOX_MAXLEN + 1_000
CHUNK = 500  # writes in flight at once (pipelined by the store)


@step
async def chatter(n: int) -> int:
    for start in range(0, n, CHUNK):
        await asyncio.gather(
            *(emit({"type": "text", "text": str(i)}) for i in range(start, min(n, start + CHUNK)))
        )
    return n


@workflow(name="outbox_chatter")
async def chatter_wf(n: int) -> int:
    await chatter(n)
    await sleep("1h")  # the run stays alive, suspended on a timer, no prompt pending
    return n


@step
async def ask(what: str) -> Any:
    return await step_hook(what, prompt=f"{what}?", timeout="1h")


@workflow(name="outbox_ask")
async def ask_wf() -> Any:
    answer = await ask("first")
    await sleep("1h")
    return answer


@workflow(name="outbox_ask_twice")
async def ask_twice_wf() -> Any:
    return await asyncio.gather(ask("one"), ask("two"))


@pytest.fixture
async def redis_rt(redis_url: str) -> AsyncIterator[Runtime]:
    """Real Redis only: the bulk writes are slow on the embedded store's Lua."""
    async with Runtime(redis_url, partitions=4, retention=RETENTION) as runtime:
        yield runtime


@pytest.fixture
async def any_rt(backend_url: str) -> AsyncIterator[Runtime]:
    async with Runtime(backend_url, partitions=4, retention=RETENTION) as runtime:
        yield runtime


async def _outbox(rt: Runtime, session: str) -> tuple[int, int]:
    """The outbox's length and TTL (seconds; -1: none)."""
    store = raw(rt)
    key = store.session_key("outbox", session)
    return int(await store.client.xlen(key)), int(await store.client.ttl(key))


async def _until_status(rt: Runtime, run_id: str, status: RunStatus) -> None:
    for _ in range(1500):
        info = await rt.get_run(run_id)
        if info.status is status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"run {run_id} never became {status}: {info}")


def _kept(length: int) -> None:
    print(f"outbox length after {MORE_THAN_KEPT} writes: {length} (cap ~{OUTBOX_MAXLEN})")
    assert OUTBOX_MAXLEN <= length <= OUTBOX_MAXLEN + SLACK


async def test_post_to_session_trims_the_outbox_and_sets_its_expiry(redis_rt: Runtime) -> None:
    session = redis_rt.new_session_id()
    for start in range(0, MORE_THAN_KEPT, CHUNK):
        await asyncio.gather(
            *(
                redis_rt.post_to_session(session, {"type": "text", "n": i})
                for i in range(start, min(MORE_THAN_KEPT, start + CHUNK))
            )
        )
    length, ttl = await _outbox(redis_rt, session)
    _kept(length)
    assert 0 < ttl <= RETENTION_SECONDS
    # the newest messages are the ones kept
    last = await redis_rt.read_outbox(session, "0-0", count=OUTBOX_MAXLEN + SLACK)
    assert last[-1][1]["n"] == MORE_THAN_KEPT - 1


async def test_emit_from_a_step_trims_the_outbox_and_sets_its_expiry(redis_rt: Runtime) -> None:
    session = redis_rt.new_session_id()
    async with running(Worker(redis_rt, timer_tick=0.01)):
        run_id = await redis_rt.start(chatter_wf, MORE_THAN_KEPT, session=session)
        await _until_status(redis_rt, run_id, RunStatus.SUSPENDED)
    length, ttl = await _outbox(redis_rt, session)
    _kept(length)
    # the run is alive (asleep) and no prompt is pending: the messages still expire
    assert 0 < ttl <= RETENTION_SECONDS


async def test_an_answer_lets_the_outbox_expire_once_no_prompt_is_pending(
    any_rt: Runtime,
) -> None:
    session = any_rt.new_session_id()
    worker = Worker(any_rt, timer_tick=0.01)
    async with running(worker):
        run_id = await any_rt.start(ask_wf, session=session)
        await _until_status(any_rt, run_id, RunStatus.SUSPENDED)
    # no worker now: what follows is the answer's own write, not the run's next one
    assert (await _outbox(any_rt, session))[1] == -1  # a pending prompt never expires
    [hook] = await any_rt.list_hooks(run_id=run_id)
    assert await any_rt.resume_hook(hook.token, "yes")
    messages = await any_rt.read_outbox(session, "0-0", count=100)
    assert messages[-1][1]["type"] == "answered"  # the answer echoed to the session
    assert 0 < (await _outbox(any_rt, session))[1] <= RETENTION_SECONDS


async def test_no_writer_sets_an_expiry_while_a_prompt_is_pending(any_rt: Runtime) -> None:
    session = any_rt.new_session_id()
    async with running(Worker(any_rt, timer_tick=0.01)):
        run_id = await any_rt.start(ask_twice_wf, session=session)
        await _until_status(any_rt, run_id, RunStatus.SUSPENDED)
    hooks = await any_rt.list_hooks(run_id=run_id)
    assert len(hooks) == 2
    await any_rt.post_to_session(session, {"type": "text", "text": "still there?"})
    assert await any_rt.resume_hook(hooks[0].token, "one answer")
    # one prompt is still pending: neither write set an expiry
    assert (await _outbox(any_rt, session))[1] == -1
    assert await any_rt.resume_hook(hooks[1].token, "the other")
    assert 0 < (await _outbox(any_rt, session))[1] <= RETENTION_SECONDS


async def test_a_message_after_the_outbox_expired_does_not_live_for_ever(
    any_rt: Runtime,
) -> None:
    session = any_rt.new_session_id()
    await any_rt.post_to_session(session, {"type": "text", "text": "hello"})
    store = raw(any_rt)
    await store.client.delete(store.session_key("outbox", session))  # as if it expired
    await any_rt.post_to_session(session, {"type": "text", "text": "anyone?"})
    length, ttl = await _outbox(any_rt, session)
    assert length == 1
    assert 0 < ttl <= RETENTION_SECONDS

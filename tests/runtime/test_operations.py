"""What operators see and keep: run listing, store-wide stats, retention, bounded keys,
the session outbox."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from runtime import RunStatus, Runtime, Worker, step, step_hook, workflow
from runtime.errors import InvalidPayload, UsageError
from tests.raw_redis import raw


@step
async def ask() -> Any:
    return await step_hook("ask", prompt="Continue?")


@workflow(name="ops_wf")
async def ops_wf() -> Any:
    return await ask()


async def test_list_runs_and_stats(rt: Runtime, worker: Worker) -> None:
    first = await rt.start(ops_wf)
    second = await rt.start(ops_wf)
    await worker.drain()
    [h1, _] = sorted(await rt.list_hooks(), key=lambda h: h.run_id != first)
    await rt.resume_hook(h1.token, "go")
    await worker.drain()
    runs = await rt.list_runs()
    assert {r.run_id for r in runs} == {first, second}
    assert [r.run_id for r in await rt.list_runs(status="completed")] == [first]
    assert [r.run_id for r in await rt.list_runs(RunStatus.SUSPENDED)] == [second]
    assert await rt.stats() == {
        "started": 2,
        "completed": 1,
        "failed": 0,
        "cancelled": 0,
        "suspended": 1,
        "blocked": 0,
        "parked": 0,
        "hooks_pending": 1,
    }
    await rt.cancel(second)
    stats = await rt.stats()
    assert (stats["suspended"], stats["cancelled"], stats["hooks_pending"]) == (0, 1, 0)


async def test_a_list_limit_below_one_is_refused_not_a_silent_cut(rt: Runtime) -> None:
    """A store slices with the limit: -2 once returned all runs but the last 2, 0 none
    (after reading the whole tag index)."""
    for _ in range(3):
        await rt.start(ops_wf, tags={"team": "ops"})
    for limit in (-2, 0, True, 1.5):
        for tag in (None, "team:ops"):
            with pytest.raises(UsageError, match="limit must be a positive integer") as refused:
                await rt.list_runs(limit=limit, tag=tag)  # type: ignore[arg-type]
            assert f"got {limit!r}" in str(refused.value)
    assert len(await rt.list_runs(limit=2)) == 2
    assert len(await rt.list_runs(limit=2, tag="team:ops")) == 2


async def test_an_unknown_status_is_refused_naming_the_statuses(rt: Runtime) -> None:
    run_id = await rt.start(ops_wf)
    with pytest.raises(UsageError) as runs:
        await rt.list_runs(status="bogus")
    assert str(runs.value).startswith("run status must be one of pending, running, suspended")
    assert str(runs.value).endswith("got 'bogus'")
    for where in ({}, {"run_id": run_id}):
        with pytest.raises(UsageError) as hooks:
            await rt.list_hooks(status="bogus", **where)
        assert str(hooks.value) == (
            "hook status must be one of pending, received, expired, cancelled, closed "
            "(or None), got 'bogus'"
        )


async def test_refused_cancels_and_restarts_name_their_run(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(ops_wf)
    await worker.drain()
    for reason in ("x" * 5000, object()):
        with pytest.raises(InvalidPayload) as cancel:
            await rt.cancel(run_id, reason=reason)  # type: ignore[arg-type]
        assert cancel.value.run_id == run_id and f"(run={run_id})" in str(cancel.value)
    await rt.cancel(run_id)
    with pytest.raises(UsageError, match="no step 'nope'") as restart:
        await rt.restart(run_id, from_step="nope")
    assert restart.value.run_id == run_id and f"(run={run_id})" in str(restart.value)


async def test_answers_reach_the_session_outbox_atomically(rt: Runtime, worker: Worker) -> None:
    session = Runtime.new_session_id()
    run_id = await rt.start(ops_wf, session=session)
    await worker.drain()
    [pending] = await rt.list_hooks()
    await rt.resume_hook(pending.token, {"yes": True})
    await worker.drain()
    messages = [m for _, m in await rt.read_outbox(session)]
    assert [m["type"] for m in messages] == ["prompt", "answered", "status"]
    assert messages[0]["prompt"] == "Continue?" and messages[0]["token"] == pending.token
    assert messages[1] == {
        "type": "answered",
        "run_id": run_id,
        "token": pending.token,
        "payload": {"yes": True},
    }
    assert messages[2]["status"] == "completed"


async def test_finished_runs_expire_and_suspended_runs_do_not(redis_url: str) -> None:
    async with Runtime(redis_url, partitions=2, retention=1) as rt:
        worker = Worker(rt)
        session = Runtime.new_session_id()
        done = await rt.start(ops_wf, session=session)
        waiting = await rt.start(ops_wf)
        cancelled = await rt.start(ops_wf)
        await worker.drain()
        hooks = {h.run_id: h for h in await rt.list_hooks()}
        await rt.resume_hook(hooks[done].token, "ok")
        await rt.cancel(cancelled)
        await worker.drain()
        assert await rt.wait(done, timeout=5) == "ok"

        store = raw(rt)

        def keys_of(run_id: str) -> list[str]:
            k = store.run_keys(run_id)
            return [k.run, k.events, k.ckpt, k.hooks]

        # a suspended run holds a bounded number of keys: hash, events, hooks (+ ckpt)
        assert await store.client.exists(*keys_of(waiting)) == 3
        for run_id in (done, cancelled):
            for key in keys_of(run_id):
                assert await store.client.ttl(key) in (-2, 1)  # expiring or already gone
        deadline = time.monotonic() + 5
        outbox = store.session_key("outbox", session)
        while await store.client.exists(*keys_of(done), *keys_of(cancelled), outbox):
            assert time.monotonic() < deadline, "finished runs were not removed"
            await asyncio.sleep(0.1)
        assert await store.client.ttl(store.run_keys(waiting).run) == -1  # never expires
        assert (await rt.get_run(waiting)).status is RunStatus.SUSPENDED


async def test_a_session_outbox_expires_only_when_no_prompt_is_pending(redis_url: str) -> None:
    async with Runtime(redis_url, partitions=2, retention="1h") as rt:
        worker = Worker(rt)
        session = Runtime.new_session_id()
        first = await rt.start(ops_wf, session=session)
        second = await rt.start(ops_wf, session=session)
        await worker.drain()
        hooks = {h.run_id: h for h in await rt.list_hooks()}
        await rt.resume_hook(hooks[first].token, "done")
        await worker.drain()
        assert await rt.wait(first, timeout=5) == "done"
        # the first run finished, but the second's prompt is still pending: no TTL
        store = raw(rt)
        outbox = store.session_key("outbox", session)
        assert await store.client.ttl(outbox) == -1
        await rt.cancel(second)
        ttl = await store.client.ttl(outbox)
        assert 3500 < ttl <= 3600  # nothing pending any more: retention applies
        waiting = store.keys.key("waiting", store.run_keys(second).partition)
        assert await store.client.hlen(waiting) == 0

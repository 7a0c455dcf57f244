"""The rule for ``on_created`` and the hook's deadline, in-process, against the embedded
store and real Redis (the crash itself: ``test_on_created_after_crash.py``): a hook does
not expire before its ``on_created`` returned once; asked again (the step is retried, or
re-executed after a crash), it gets a fresh deadline; an answer that came in before the
asking again is kept."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from runtime import STEP_HOOK_TIMEOUT, Runtime, Worker, step, step_hook, workflow
from tests.raw_redis import raw

# What each on_created call saw, and the runtime and worker the test drives.
seen: list[dict[str, Any]] = []
ctx: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _reset(rt: Runtime, worker: Worker) -> None:
    seen.clear()
    ctx.clear()
    ctx.update(rt=rt, worker=worker)


async def _hook_now(token: str) -> dict[str, Any]:
    rt: Runtime = ctx["rt"]
    run_id = token.split(":")[0]
    info = await rt.get_run(run_id)
    [hook] = [h for h in info.hooks if h.token == token]
    types = [e.type for e in await rt.events(run_id)]
    return {"status": hook.status.value, "expires_at": hook.expires_at, "types": types}


async def _until_past(expires_at: float) -> None:
    """Until the clock the scripts use is past the deadline (they compare milliseconds)."""
    while int(time.time() * 1000) <= int(expires_at * 1000):
        await asyncio.sleep(0.005)


async def _slow_ask(token: str) -> None:
    """An on_created slower than the hook's timeout: the deadline passes, and the deadline
    loop runs, while it is still asking."""
    before = await _hook_now(token)
    await _until_past(before["expires_at"])
    await ctx["worker"].fire_due()
    seen.append(await _hook_now(token))


@step
async def ask_slowly() -> Any:
    answer = await step_hook("slow", timeout="50ms", on_created=_slow_ask, on_timeout="return")
    return "timed out" if answer is STEP_HOOK_TIMEOUT else answer


@workflow(name="ask_slowly")
async def ask_slowly_wf() -> Any:
    return await ask_slowly()


async def test_a_hook_does_not_expire_before_its_on_created_returned(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(ask_slowly_wf)
    await worker.drain()
    # while on_created ran, its deadline passed and fired: the hook stayed pending
    [during] = seen
    assert during["status"] == "pending"
    assert "hook.expired" not in during["types"]
    # once it returned, the deadline that passed expires it at once
    await worker.fire_due()
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "timed out"
    assert [e.type for e in await rt.events(run_id)].count("hook.expired") == 1
    assert await raw(rt).client.zcard(raw(rt).run_keys(run_id).deadlines) == 0


async def _flaky_ask(token: str) -> None:
    """Fails the first time it is called."""
    seen.append({"token": token, **await _hook_now(token)})
    if len(seen) == 1:
        await asyncio.sleep(0.01)  # the asking again is in a later millisecond
        raise ConnectionRefusedError("the mail server said no")


@step(retries=1, retry_delay=0)
async def ask_flakily() -> Any:
    if ctx.get("answer_first") and seen:
        # The retry, before it asks again: someone who had the token answers now (an
        # answer landing between the step's re-execution and its asking again).
        assert await ctx["rt"].resume_hook(seen[0]["token"], "early")
    return await step_hook("flaky", timeout="1h", on_created=_flaky_ask, on_timeout="return")


@workflow(name="ask_flakily")
async def ask_flakily_wf() -> Any:
    return await ask_flakily()


async def test_asked_again_the_hook_gets_a_fresh_deadline(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(ask_flakily_wf)
    await worker.drain()
    first, second = seen  # on_created raised, the step was retried and asked again
    assert second["expires_at"] > first["expires_at"]  # the whole hour from the asking
    [hook] = await rt.list_hooks(run_id=run_id)
    assert hook.expires_at == second["expires_at"]
    score = await raw(rt).client.zscore(
        raw(rt).run_keys(run_id).deadlines, f"{run_id}|h|{hook.hook_id}"
    )
    assert score == int(second["expires_at"] * 1000)  # the deadline that counts
    assert await rt.resume_hook(hook.token, "late but fine")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "late but fine"
    types = [e.type for e in await rt.events(run_id)]
    assert types.count("hook.created") == 1


async def test_an_answer_given_before_the_asking_again_is_kept(rt: Runtime, worker: Worker) -> None:
    ctx["answer_first"] = True
    run_id = await rt.start(ask_flakily_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "early"
    assert len(seen) == 1  # answered: nobody to ask again
    [hook] = (await rt.get_run(run_id)).hooks
    assert hook.status.value == "received"  # not made pending again by the asking again
    assert await rt.list_hooks() == []
    assert await raw(rt).client.zcard(raw(rt).run_keys(run_id).deadlines) == 0

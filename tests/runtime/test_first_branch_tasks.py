"""What first() makes of branches that run steps, step_hook steps, retries with backoff,
children, loops of first() with gathers and ``asyncio.wait_for``: who wins, and each
message received once (review probes of the tree of a branch's calls, engine/tracks.py).
Each case runs with the worker that resumes from its replay cache and one that replays
the whole log."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime import (
    RunStatus,
    Runtime,
    Worker,
    child,
    first,
    hook,
    receive,
    step,
    step_hook,
    workflow,
)
from tests.apps.messages_app import against_stop, handle_message, handled
from tests.helpers import answer, cached_or_full, message_then_stop, stop_then_message

# step_hook step in a branch.


@step
async def ask() -> Any:
    return await step_hook("h")


@workflow(name="branch_tasks_step_hook_branch")
async def step_hook_branch() -> list[Any]:
    which, value = await first(hook("stop"), ask())
    return [which, value]


@pytest.mark.parametrize("order", ["h", "stop", "h-stop", "stop-h"])
@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
async def test_a_step_hook_step_in_a_branch(
    rt: Runtime, worker: Worker, full: bool, order: str
) -> None:
    w = cached_or_full(rt, worker, full)
    run_id = await rt.start(step_hook_branch)
    await w.drain()
    for name in order.split("-"):
        await answer(rt, name, name)
    await w.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error)
    result = await rt.wait(run_id, timeout=5)
    if order in ("h",):
        assert result == [1, "h"]
    elif order == "stop":
        assert result == [0, "stop"]
    else:
        assert result[0] in (0, 1)


# Retries with backoff in a branch.

attempts: list[int] = []


async def _fails_once() -> str:
    attempts.append(1)
    if len(attempts) < 2:
        raise RuntimeError("once")
    return "ok"


@step(retries=2, retry_delay=0.05)
async def flaky() -> str:
    return await _fails_once()


# The same, backing off long enough that "stop" is answered before its retry is due,
# however loaded the machine (with 0.05 s, the retry ran first now and then under load).
LONG_BACKOFF = 0.6


@step(retries=2, retry_delay=LONG_BACKOFF)
async def flaky_backing_off_long() -> str:
    return await _fails_once()


@workflow(name="branch_tasks_flaky_branch")
async def flaky_branch() -> list[Any]:
    which, _ = await first(hook("stop"), flaky())
    return [which, await handle_message(await receive("v"))]


@workflow(name="branch_tasks_flaky_branch_losing")
async def flaky_branch_losing() -> list[Any]:
    which, _ = await first(hook("stop"), flaky_backing_off_long())
    return [which, await handle_message(await receive("v"))]


async def _receive_then_flaky() -> Any:
    message = await receive("v")
    await flaky_backing_off_long()
    return message


RECEIVE_FLAKY = against_stop("branch_tasks_receive_then_flaky", _receive_then_flaky)


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
async def test_a_flaky_step_in_a_branch_wins_after_its_retry(
    rt: Runtime, worker: Worker, full: bool
) -> None:
    attempts.clear()
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await rt.start(flaky_branch)
    await w.drain()
    await asyncio.sleep(0.2)
    await w.drain()
    await rt.send(run_id, "v", "a")
    await w.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error)
    assert await rt.wait(run_id, timeout=5) == [1, "handled a"]


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
async def test_a_flaky_step_in_a_losing_branch(rt: Runtime, worker: Worker, full: bool) -> None:
    attempts.clear()
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await rt.start(flaky_branch_losing)
    await w.drain()
    await answer(rt, "stop", 1)
    await w.drain()
    await asyncio.sleep(LONG_BACKOFF + 0.1)  # its retry timer, withdrawn, does not run it
    await w.drain()
    await rt.send(run_id, "v", "a")
    await w.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error)
    assert await rt.wait(run_id, timeout=5) == [0, "handled a"]
    assert len(attempts) == 1


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
async def test_a_received_message_then_flaky_step_loses_while_backing_off(
    rt: Runtime, worker: Worker, full: bool
) -> None:
    """The branch took "a" and handed it to flaky, which backs off; stop wins. "a" was
    used (kept); the run's receive waits for "b"."""
    attempts.clear()
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await message_then_stop(rt, w, RECEIVE_FLAKY)
    await asyncio.sleep(LONG_BACKOFF + 0.1)
    await w.drain()
    await rt.send(run_id, "v", "b")
    await w.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error)
    assert await rt.wait(run_id, timeout=5) == [0, "handled b"]


# child() in a branch.


@workflow(name="branch_tasks_kid")
async def r9_kid() -> Any:
    return await hook("kid_q")


@workflow(name="branch_tasks_child_branch")
async def child_branch() -> list[Any]:
    which, value = await first(hook("stop"), child(r9_kid))
    return [which, value]


@pytest.mark.parametrize("order", ["kid_q-stop", "stop-kid_q"])
@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
async def test_a_child_in_a_branch(rt: Runtime, worker: Worker, full: bool, order: str) -> None:
    w = cached_or_full(rt, worker, full)
    run_id = await rt.start(child_branch)
    await w.drain()
    a, b = order.split("-")
    await answer(rt, a, a)
    if a == "kid_q":
        await w.drain()  # the child ends (and only then the parent learns it)
        # the parent may have run already; answer stop only if still pending
        if (await rt.get_run(run_id)).status is RunStatus.SUSPENDED:
            await answer(rt, b, b)
        await w.drain()
        assert await rt.wait(run_id, timeout=5) == [1, "kid_q"]
    else:
        await w.drain()
        assert await rt.wait(run_id, timeout=5) == [0, "stop"]


# first() in a loop with gathers: what a losing gather's receive took goes to the next.


async def _gather_receive_and_hook(i: int) -> Any:
    return await asyncio.gather(receive("v"), hook(f"h{i}"))


@workflow(name="branch_tasks_loop_gathers")
async def loop_gathers() -> list[Any]:
    out = []
    for i in range(2):
        which, value = await first(hook(f"stop{i}"), _gather_receive_and_hook(i))
        out.append([which, value])
    out.append(await handle_message(await receive("v")))
    return out


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
async def test_first_in_a_loop_with_gathers(rt: Runtime, worker: Worker, full: bool) -> None:
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await rt.start(loop_gathers)
    await w.drain()
    await rt.send(run_id, "v", "a")
    await w.drain()
    await answer(rt, "stop0", 0)
    await w.drain()
    await answer(rt, "h1", 1)
    await w.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.SUSPENDED, (info.status, info.error)
    await rt.send(run_id, "v", "b")
    await w.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error, handled)
    assert await rt.wait(run_id, timeout=5) == [[0, 0], [1, ["a", 1]], "handled b"]


# asyncio.wait_for around a receive inside a losing branch (3.11: a task of its own).


async def _wait_for_receive() -> Any:
    return await asyncio.wait_for(receive("v"), 60)


WAIT_FOR = against_stop("branch_tasks_wait_for_receive", _wait_for_receive)


async def _hook_then_wait_for_receive() -> Any:
    return await asyncio.gather(hook("h"), asyncio.wait_for(receive("v"), 60))


GATHER_WAIT_FOR = against_stop("branch_tasks_gather_wait_for_receive", _hook_then_wait_for_receive)


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize("wf", [WAIT_FOR, GATHER_WAIT_FOR], ids=["wait_for", "gather"])
async def test_wait_for_receive_in_a_losing_branch(
    rt: Runtime, worker: Worker, full: bool, wf: Any
) -> None:
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await stop_then_message(rt, w, wf)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error, handled)
    assert await rt.wait(run_id, timeout=5) == [0, "handled a"]

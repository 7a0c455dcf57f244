"""Waits inside an ``asyncio.TaskGroup``: the group's exception group stands for what its
tasks raised (the engine's suspension, a failure), at the top of the body, inside a
gathered branch and inside a first()'s branch. Before, a group holding a suspension was
neither a Suspend nor an Exception to the execution: the execution died without a word
and the run stayed "running"."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from runtime import RunStatus, Runtime, Worker, first, hook, receive, step, workflow
from runtime.engine import branches


@step
async def looks_up() -> str:
    return "looked up"


@step(retries=0)
async def fails() -> None:
    raise ValueError("the service said no")


@workflow(name="tg_at_the_top")
async def tg_at_the_top() -> Any:
    async with asyncio.TaskGroup() as group:
        asked = group.create_task(hook("ask"))
        looked = group.create_task(looks_up())
    return [asked.result(), looked.result()]


async def _asks_in_a_group() -> Any:
    async with asyncio.TaskGroup() as group:
        asked = group.create_task(hook("ask"))
    return asked.result()


@workflow(name="tg_in_a_gathered_branch")
async def tg_in_a_gathered_branch() -> Any:
    return await asyncio.gather(_asks_in_a_group(), looks_up())


@workflow(name="tg_in_a_first_branch")
async def tg_in_a_first_branch() -> Any:
    return list(await first(_asks_in_a_group(), hook("other")))


async def answer(rt: Runtime, run_id: str, name: str, value: Any) -> None:
    [pending] = [h for h in await rt.list_hooks("pending", run_id=run_id) if h.name == name]
    assert await rt.resume_hook(pending.token, value) is True


@pytest.mark.parametrize(
    ("wf", "result"),
    [
        (tg_at_the_top, ["yes", "looked up"]),
        (tg_in_a_gathered_branch, ["yes", "looked up"]),
        (tg_in_a_first_branch, [0, "yes"]),
    ],
    ids=["top", "gathered_branch", "first_branch"],
)
async def test_a_wait_in_a_task_group_suspends_and_completes_with_its_answer(
    rt: Runtime, worker: Worker, wf: Any, result: Any
) -> None:
    run_id = await rt.start(wf)
    await asyncio.wait_for(worker.drain(), timeout=10)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await answer(rt, run_id, "ask", "yes")
    await asyncio.wait_for(worker.drain(), timeout=10)
    info = await rt.get_run(run_id)
    assert (info.status, info.result, info.error) == (RunStatus.COMPLETED, result, None)


@workflow(name="tg_failure_beside_a_wait")
async def tg_failure_beside_a_wait() -> Any:
    async with asyncio.TaskGroup() as group:
        group.create_task(hook("ask"))
        group.create_task(fails())
    return "never"


@workflow(name="tg_failure_handled")
async def tg_failure_handled() -> Any:
    handled: list[str] = []
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(hook("ask"))
            group.create_task(fails())
    except* Exception as failures:
        handled.extend(type(e).__name__ for e in failures.exceptions)
    return handled


async def test_a_failure_beside_a_wait_in_a_task_group_fails_the_run_at_once(
    rt: Runtime, worker: Worker
) -> None:
    """As in real time: the group cancels the wait when the step fails, without its answer."""
    run_id = await rt.start(tg_failure_beside_a_wait)
    await asyncio.wait_for(worker.drain(), timeout=10)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED, [e.type for e in await rt.events(run_id)]
    assert info.error is not None and info.error["type"] == "ExceptionGroup"
    assert info.error["message"] == "unhandled errors in a TaskGroup (1 sub-exception)"
    assert "hook.answered" not in [e.type for e in await rt.events(run_id)]


async def test_the_code_handles_a_task_groups_failure_without_the_waits_answer(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(tg_failure_handled)
    await asyncio.wait_for(worker.drain(), timeout=10)
    info = await rt.get_run(run_id)
    assert (info.status, info.result) == (RunStatus.COMPLETED, ["StepFailed"])


async def cancelled_beside_a_failure(wait: Coroutine[Any, Any, Any]) -> None:
    """Runs ``wait`` in a TaskGroup beside a step that fails: the group cancels it."""
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(wait)
            group.create_task(fails())
    except* Exception:
        pass


@workflow(name="tg_failure_handled_then_asks")
async def tg_failure_handled_then_asks() -> Any:
    await cancelled_beside_a_failure(hook("ask"))
    return await hook("then")


async def test_an_answer_to_a_wait_its_group_cancelled_changes_nothing(
    rt: Runtime, worker: Worker
) -> None:
    """The group cancelled the wait, but its question stays open until the run ends (what
    cancelled it, a failure replayed or a timeout by the clock, is not in the log): its
    answer wakes the run, which replays to the same place and waits for the next."""
    run_id = await rt.start(tg_failure_handled_then_asks)
    await asyncio.wait_for(worker.drain(), timeout=10)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await answer(rt, run_id, "ask", "too late")
    await asyncio.wait_for(worker.drain(), timeout=10)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await answer(rt, run_id, "then", "yes")
    await asyncio.wait_for(worker.drain(), timeout=10)
    info = await rt.get_run(run_id)
    assert (info.status, info.result) == (RunStatus.COMPLETED, "yes")
    steps = [e for e in await rt.events(run_id) if e.type == "step.started"]
    assert len(steps) == 1  # (the failed step is not run again)


@workflow(name="tg_receive_cancelled_then_receives")
async def tg_receive_cancelled_then_receives() -> Any:
    await cancelled_beside_a_failure(receive("v"))
    return await receive("v")


async def test_a_receive_its_group_cancelled_still_takes_the_next_message(
    rt: Runtime, worker: Worker
) -> None:
    """A limit the README states: the cancelled receive is not withdrawn (nothing in the
    log says it was cancelled), so the next message of its topic goes to it when it comes,
    and the run's own receive gets the one after (in real time it would get the first)."""
    run_id = await rt.start(tg_receive_cancelled_then_receives)
    await asyncio.wait_for(worker.drain(), timeout=10)
    await rt.send(run_id, "v", "first")
    await asyncio.wait_for(worker.drain(), timeout=10)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await rt.send(run_id, "v", "second")
    await asyncio.wait_for(worker.drain(), timeout=10)
    info = await rt.get_run(run_id)
    assert (info.status, info.result) == (RunStatus.COMPLETED, "second")


async def test_a_task_groups_wait_in_a_gathered_branch_does_not_wait_out_the_hold(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch awaits its group's end, which only the held wait's task can bring: the
    hold does not wait for it (made an hour here, a drain that waited would time out).
    Before, the group's own future told nothing of its tasks, and each such suspension
    waited out HOLD_SECONDS."""
    monkeypatch.setattr(branches, "HOLD_SECONDS", 3600.0)
    run_id = await rt.start(tg_in_a_gathered_branch)
    await asyncio.wait_for(worker.drain(), timeout=10)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await answer(rt, run_id, "ask", "yes")
    await asyncio.wait_for(worker.drain(), timeout=10)
    info = await rt.get_run(run_id)
    assert (info.status, info.result) == (RunStatus.COMPLETED, ["yes", "looked up"])

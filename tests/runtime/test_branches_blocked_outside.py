"""A task of the workflow blocked on something outside the run (an ``asyncio.Event``, a
``Queue``) that only a wait's answer would feed: once the body has ended it is cancelled,
not waited for, and the next pass runs it again. Before, the execution waited for it
forever: the run stayed "running", its worker's slot taken, nothing said why. A task so
cancelled that goes on after its CancelledError (a cleanup of the code's own) has its
durable calls refused: they are not the run's, as the next pass runs the task again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime import RunStatus, Runtime, Worker, hook, step, workflow


@step
async def looks_up() -> str:
    return "looked up"


async def asks(answered: asyncio.Event) -> Any:
    """Asks, and sets ``answered`` once the answer came."""
    answer = await hook("ask")
    answered.set()
    return answer


@workflow(name="bo_event_set_after_the_answer")
async def bo_event_set_after_the_answer() -> Any:
    answered = asyncio.Event()

    async def waits_for_the_answer() -> str:
        await answered.wait()
        return await looks_up()

    return await asyncio.gather(asks(answered), waits_for_the_answer())


CLEANED: list[str] = []


@step
async def cleans_up() -> str:
    CLEANED.append("cleaned")
    return "cleaned"


@workflow(name="bo_cleanup_on_cancel")
async def bo_cleanup_on_cancel(cleanup: str) -> Any:
    answered = asyncio.Event()

    async def waits_for_the_answer() -> str:
        try:
            await answered.wait()
        except asyncio.CancelledError:
            if cleanup == "step":
                await cleans_up()
            elif cleanup == "hook":
                CLEANED.append(await hook("sorry"))
            elif cleanup == "step after an await":  # (an await outside the run)
                await asyncio.sleep(0.01)
                await cleans_up()
            elif cleanup == "gathered step":  # (in a task of the cancelled one's)
                await asyncio.gather(cleans_up())
            elif cleanup == "shielded step":
                await asyncio.shield(cleans_up())
            else:  # a gathered hook
                CLEANED.extend(await asyncio.gather(hook("sorry")))
            raise
        return await looks_up()

    return await asyncio.gather(asks(answered), waits_for_the_answer())


@workflow(name="bo_queue_fed_after_the_answer")
async def bo_queue_fed_after_the_answer() -> Any:
    answers: asyncio.Queue[Any] = asyncio.Queue()

    async def asks() -> Any:
        answer = await hook("ask")
        await answers.put(answer)
        return answer

    async def reads() -> Any:
        return ["read", await answers.get()]

    return await asyncio.gather(asks(), reads())


@workflow(name="bo_task_left_blocked")
async def bo_task_left_blocked() -> Any:
    never = asyncio.Event()
    left = asyncio.create_task(never.wait())  # left behind, blocked for good
    answer = await hook("ask")
    return [answer, left.done()]


async def run_to_the_end(rt: Runtime, worker: Worker, wf: Any, *args: Any) -> tuple[Any, ...]:
    run_id = await rt.start(wf, *args)
    await asyncio.wait_for(worker.drain(), timeout=10)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    [pending] = await rt.list_hooks("pending", run_id=run_id)
    assert await rt.resume_hook(pending.token, "yes") is True
    await asyncio.wait_for(worker.drain(), timeout=10)
    info = await rt.get_run(run_id)
    steps = [e.data["step_id"] for e in await rt.events(run_id) if e.type == "step.completed"]
    return info.status, info.result, steps


async def test_a_branch_waiting_on_an_event_the_answer_sets_completes(
    rt: Runtime, worker: Worker
) -> None:
    assert await run_to_the_end(rt, worker, bo_event_set_after_the_answer) == (
        RunStatus.COMPLETED,
        ["yes", "looked up"],
        ["0_1.looks_up-0"],  # (the second branch's scope)
    )


async def test_a_branch_reading_a_queue_the_answer_feeds_completes(
    rt: Runtime, worker: Worker
) -> None:
    assert await run_to_the_end(rt, worker, bo_queue_fed_after_the_answer) == (
        RunStatus.COMPLETED,
        ["yes", ["read", "yes"]],
        [],
    )


async def test_a_task_left_blocked_does_not_keep_the_run_running(
    rt: Runtime, worker: Worker
) -> None:
    assert await run_to_the_end(rt, worker, bo_task_left_blocked) == (
        RunStatus.COMPLETED,
        ["yes", False],
        [],
    )


@pytest.mark.parametrize(
    "cleanup",
    ["step", "hook", "step after an await", "gathered step", "shielded step", "gathered hook"],
)
async def test_a_cancelled_branchs_cleanup_calls_are_refused(
    rt: Runtime, worker: Worker, cleanup: str
) -> None:
    """Before, its cleanup step ran and was recorded where the next pass (the Event set by
    the answer) calls looks_up, and the run was blocked as nondeterministic; its cleanup
    hook asked the person a second question. The same for a call in a task the cancelled
    one makes (gathered, shielded)."""
    CLEANED.clear()
    assert await run_to_the_end(rt, worker, bo_cleanup_on_cancel, cleanup) == (
        RunStatus.COMPLETED,
        ["yes", "looked up"],
        ["0_1.looks_up-0"],
    )
    assert CLEANED == []

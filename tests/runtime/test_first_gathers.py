"""A first() whose branch gathers tasks: the branch finished when the last of them did, and
a receive whose task did nothing after it took a message nothing used, whatever the order
of the gather's arguments and of the tasks' calls (engine/tracks.py). Each case runs on
the embedded store and Redis, with the worker that resumes from its replay cache and one
that replays the whole log. Found by review: one list of calls per branch, in the order
they were reached, made the outcome depend on that order (each case failed on 672544b)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime import RunStatus, Runtime, StepFailed, Worker, first, hook, receive, step, workflow
from tests.apps.messages_app import against_stop, handle_message, handled
from tests.helpers import answer, cached_or_full, message_then_stop, stop_then_message

# A nested first() in a task gathered in a losing branch can still run when its branch
# ended (gather passes on the first Suspend): the decision must see its receive as it took
# the message. (It noted its winner only when it returned, after the decision: the message
# stayed taken, and nothing read it.)


async def _gather_hook_and_a_timed_receive_in_a_first() -> Any:
    return await asyncio.gather(hook("h"), first(hook("x"), receive("v", timeout="1h")))


async def _gather_hook_and_a_plain_receive() -> Any:  # the same without nesting
    return await asyncio.gather(hook("h"), hook("x"), receive("v"))


LATE = [
    against_stop("gathers_late_nested_timed", _gather_hook_and_a_timed_receive_in_a_first),
    against_stop("gathers_late_bare", _gather_hook_and_a_plain_receive),
]


@pytest.mark.parametrize("message_first", [False, True], ids=["stop-then-a", "a-then-stop"])
@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize("wf", LATE, ids=["nested-timed", "bare"])
async def test_a_message_nothing_used_in_a_losing_gather_goes_to_the_next_receive(
    rt: Runtime, worker: Worker, wf: Any, full: bool, message_first: bool
) -> None:
    """The losing branch gathers a hook and a receive (3 deep: in a first(), with a
    timeout); the receive takes "a" but the gather never returns: nothing used "a", so the
    run's own receive takes it. (Nested, the run waited for ever, "a" unread.)"""
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await rt.start(wf)
    await w.drain()
    if message_first:
        await rt.send(run_id, "v", "a")
        await w.drain()
        await answer(rt, "stop", 1)
    else:
        await answer(rt, "stop", 1)
        await rt.send(run_id, "v", "a")
    await w.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error, handled)
    assert await rt.wait(run_id, timeout=5) == [0, "handled a"]


# Which receive of a losing branch gives its message back does not depend on the order the
# gathered tasks reached their calls. (Only the branch's last call counted as unused.)


async def _gather_receive_then_hook() -> Any:
    return await asyncio.gather(receive("v"), hook("h"))


async def _gather_hook_then_receive() -> Any:
    return await asyncio.gather(hook("h"), receive("v"))


async def _gather_timed_receive_then_hook() -> Any:
    return await asyncio.gather(receive("v", timeout="1h"), hook("h"))


ORDER = [
    against_stop("gathers_order_receive_hook", _gather_receive_then_hook),
    against_stop("gathers_order_hook_receive", _gather_hook_then_receive),
    against_stop("gathers_order_timed_hook", _gather_timed_receive_then_hook),
]


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize("wf", ORDER, ids=["receive-hook", "hook-receive", "timed-hook"])
async def test_the_message_of_a_losing_gather_does_not_depend_on_argument_order(
    rt: Runtime, worker: Worker, wf: Any, full: bool
) -> None:
    """gather(receive("v"), hook("h")) in the losing branch; "a" comes, then stop: as
    for gather(hook("h"), receive("v")), "a" goes to the run's receive. (receive-hook:
    the run waited for ever, "a" unread.)"""
    handled.clear()
    run_id = await message_then_stop(rt, cached_or_full(rt, worker, full), wf)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error, handled)
    assert await rt.wait(run_id, timeout=5) == [0, "handled a"]


# The winner does not depend on the order of a gather's arguments: a step gathered beside
# a wait counts from when its result was recorded. (It was noted after the wait or before
# it by the order they were reached, and noted last it made the branch finish "now".)


@step
async def quick() -> str:
    return "done"


async def _hook_and_step() -> Any:
    return await asyncio.gather(hook("h"), quick())


async def _step_and_hook() -> Any:
    return await asyncio.gather(quick(), hook("h"))


async def _plain_receive_and_step() -> Any:
    return await asyncio.gather(receive("v"), quick())


async def _timed_receive_and_step() -> Any:
    return await asyncio.gather(receive("v", timeout="1h"), quick())


def _which(name: str, branch: Any) -> Any:
    @workflow(name=name)
    async def against_stop() -> int:
        which, _ = await first(hook("stop"), branch())
        return which

    return against_stop


WINNERS = [
    (_which("gathers_win_hook_step", _hook_and_step), "hook"),
    (_which("gathers_win_step_hook", _step_and_hook), "hook"),
    (_which("gathers_win_plain_step", _plain_receive_and_step), "message"),
    (_which("gathers_win_timed_step", _timed_receive_and_step), "message"),
]


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize(
    ("wf", "end"), WINNERS, ids=["hook-step", "step-hook", "plain-step", "timed-step"]
)
async def test_a_gathered_step_done_before_the_wait_ended_does_not_make_the_branch_late(
    rt: Runtime, worker: Worker, wf: Any, end: str, full: bool
) -> None:
    """The branch gathers a wait and a step, done in the first pass. Then the wait ends,
    then stop is answered, before a worker replays the run: the branch finished when its
    wait ended, before stop, whatever the argument order. (hook-step, plain-step: stop
    won.)"""
    w = cached_or_full(rt, worker, full)
    run_id = await rt.start(wf)
    await w.drain()
    if end == "hook":
        await answer(rt, "h", 1)
    else:
        await rt.send(run_id, "v", "a")
    await answer(rt, "stop", 1)
    await w.drain()
    assert await rt.wait(run_id, timeout=5) == 1


# A receive whose message the tasks started after it used (steps gathered on it): used,
# it stays taken. (The first tree's rule found no trailing wait in those tasks and fell
# back to the receive before them: the message was given back and handled twice.)


@step
async def also_handle(message: object) -> str:
    handled.append(("also", message))
    return f"also {message}"


async def _receive_then_gather_steps() -> Any:
    message = await receive("v")
    return await asyncio.gather(handle_message(message), also_handle(message))


async def _receive_then_one_step() -> Any:
    message = await receive("v")
    return await handle_message(message)


USED = [
    against_stop("gathers_receive_then_gathered_steps", _receive_then_gather_steps),
    against_stop("gathers_receive_then_one_step", _receive_then_one_step),
]


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize("wf", USED, ids=["gathered-steps", "one-step"])
async def test_a_message_steps_of_a_losing_branch_used_is_not_given_back(
    rt: Runtime, worker: Worker, wf: Any, full: bool
) -> None:
    """stop is answered, then "a" comes, before a worker runs the run: both branches finish
    in one pass and stop, earlier in the log, wins. The losing branch handed "a" to
    steps, which ran: "a" stays taken, and the run waits for another message."""
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await stop_then_message(rt, w, wf)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.SUSPENDED, (info.status, handled)
    assert handled.count("a") == 1, handled


# A step that failed for good (its failure caught by the branch) counts from when its
# failure was recorded. (Only results were dated: it counted as done in the pass.)


@step
async def broken() -> str:
    raise RuntimeError("boom")


@step
async def fine() -> str:
    return "ok"


async def _caught(call: Any) -> str:
    try:
        return str(await call())
    except StepFailed:
        return "failed"


async def _hook_and_caught_failure() -> Any:
    return await asyncio.gather(hook("h"), _caught(broken))


async def _hook_and_step_done() -> Any:
    return await asyncio.gather(hook("h"), _caught(fine))


FAILED = [
    _which("gathers_hook_and_caught_failure", _hook_and_caught_failure),
    _which("gathers_hook_and_step_done", _hook_and_step_done),
]


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize("wf", FAILED, ids=["caught-failure", "step-done"])
async def test_a_gathered_step_that_failed_before_the_wait_ended_does_not_make_the_branch_late(
    rt: Runtime, worker: Worker, wf: Any, full: bool
) -> None:
    """The branch gathers hook h and a step that fails for good (or succeeds) in the first
    pass; h is answered, then stop, before a worker runs the run: the branch finished
    when h was answered, before stop, and wins."""
    w = cached_or_full(rt, worker, full)
    run_id = await rt.start(wf)
    await w.drain()
    await answer(rt, "h", 1)
    await answer(rt, "stop", 1)
    await w.drain()
    assert await rt.wait(run_id, timeout=5) == 1


_started: set[asyncio.Future[None]] = set()


def _start_a_task(token: str) -> None:
    task = asyncio.ensure_future(asyncio.sleep(0))
    _started.add(task)
    task.add_done_callback(_started.discard)


@workflow(name="gathers_bare_hooks_whose_on_created_starts_a_task")
async def bare_hooks_whose_on_created_starts_a_task() -> int:
    which, _ = await first(hook("a", on_created=_start_a_task), hook("b", on_created=_start_a_task))
    return which


async def test_a_bare_hook_whose_on_created_starts_a_task(rt: Runtime, worker: Worker) -> None:
    """A bare hook's track starts with its wait, whatever its on_created starts (the
    first()'s group of bare waits is read from it)."""
    run_id = await rt.start(bare_hooks_whose_on_created_starts_a_task)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await answer(rt, "b", 1)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 1


# A branch starts a task that receives, then waits on a hook of its own, then awaits
# the task. The task's receive took "a"; the branch, waiting on h, loses to stop: nothing
# used "a", so it goes to the run's own receive. (The first tree counted the creator's
# hook, made before the receive, as a use: the run waited for ever, "a" unread.)


async def _task_receive_then_hook() -> Any:
    task = asyncio.ensure_future(receive("v"))
    await hook("h")
    return await task


async def _task_receive_then_nested_first() -> Any:
    task = asyncio.ensure_future(receive("v"))
    await first(hook("h"), hook("h2"))
    return await task


@step
async def unrelated() -> str:
    return "unrelated"


async def _task_receive_then_step() -> Any:
    task = asyncio.ensure_future(receive("v"))
    await unrelated()
    await hook("h")
    return await task


TASK_FIRST = [
    against_stop("gathers_task_receive_then_hook", _task_receive_then_hook),
    against_stop("gathers_task_receive_then_nested_first", _task_receive_then_nested_first),
    against_stop("gathers_task_receive_then_step", _task_receive_then_step),
]


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize("wf", TASK_FIRST, ids=["then-hook", "then-first", "then-step-hook"])
async def test_a_task_receive_started_before_a_hook_gives_its_message_back(
    rt: Runtime, worker: Worker, full: bool, wf: Any
) -> None:
    """The losing branch starts a task that receives "a", then waits on its own hook h
    (awaiting the task only after it): stop wins while h is pending. Nothing read "a": it
    goes to the run's receive, as when the receive is gathered with h."""
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await message_then_stop(rt, w, wf)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error, handled)
    assert await rt.wait(run_id, timeout=5) == [0, "handled a"]

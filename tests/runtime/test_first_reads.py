"""Who read what a task started inside a first()'s branch returned: a task that awaits it
or takes its result (a gather does) notes the read in its own track, and a losing
receive's message stays taken only if a reader went on from it (engine/tracks.py,
``ReadingTask``). Each case runs with the worker that resumes from its replay cache and
one that replays the whole log. Found by review."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from runtime import RunStatus, Runtime, Worker, hook, receive
from tests.apps.messages_app import against_stop, handle_message, handled
from tests.helpers import answer, cached_or_full, message_then_stop

# A task that awaits a task it did not create (a sibling) and uses the value: the read is
# noted in the reader's track, and the message stays taken. (Judged by the tasks the
# receive ran inside, none of which made a call after it, it was given back and handled
# twice.)


async def _sibling_reads_the_receive() -> Any:
    listening = asyncio.ensure_future(receive("v"))

    async def use() -> Any:
        message = await listening
        await handle_message(message)
        return await hook("h")

    return await asyncio.ensure_future(use())


async def _gather_sibling_reads_the_receive() -> Any:
    listening = asyncio.ensure_future(receive("v"))

    async def use() -> Any:
        await handle_message(await listening)
        return await hook("h")

    return await asyncio.gather(listening, use())


SIBLING = [
    against_stop("reads_sibling", _sibling_reads_the_receive),
    against_stop("reads_sibling_gather", _gather_sibling_reads_the_receive),
]


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize("wf", SIBLING, ids=["await", "gather"])
async def test_a_message_a_sibling_task_handled_is_not_given_back(
    rt: Runtime, worker: Worker, wf: Any, full: bool
) -> None:
    """ "a" comes: the losing branch's task `use` handles it (a step), then waits on "h";
    stop: "a" was used, so the run's receive waits for "b"."""
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await message_then_stop(rt, w, wf)
    assert handled == ["a"], handled
    info = await rt.get_run(run_id)
    assert info.status is not RunStatus.COMPLETED, (info.status, handled)
    await rt.send(run_id, "v", "b")
    await w.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "handled b"]
    assert handled == ["a", "b"]


# The branch starts a receive in a task, yields (not a durable call), then waits on a hook
# of its own and would only then await the task: nothing read the message, and it goes to
# the run's receive. (Judged by call order, the hook noted after the receive counted as a
# use: the run waited for ever.)


async def _listen_yield_then_hook() -> Any:
    listening = asyncio.ensure_future(receive("v"))
    await asyncio.sleep(0)
    await hook("h")
    return await listening


# (with a step in place of the yield: test_first_gathers.py, "then-step-hook")
LISTEN = [against_stop("reads_listen_yield", _listen_yield_then_hook)]


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize("wf", LISTEN, ids=["sleep0"])
async def test_a_message_a_task_took_before_its_creator_waited_goes_to_the_next_receive(
    rt: Runtime, worker: Worker, wf: Any, full: bool
) -> None:
    """ "a" comes: the task's receive takes it while its creator waits on "h", not having
    read it; stop: nothing used "a", and the run's own receive takes it."""
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await message_then_stop(rt, w, wf)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error, handled)
    assert await rt.wait(run_id, timeout=5) == [0, "handled a"]


# A gathered task still running when its branch's gather passed on the hook's Suspend
# takes "a" and hands it to a step (in the pass before stop): when stop wins, first() lets
# that task replay up to the step before deciding. (It decided at once, took "a" for
# unused, gave it back, and "a" was handled twice: with five bare yields between the
# receive and the step, and with a receive with a timeout, a first() of its own, in the
# model-based test, test_first_model.py.)


async def _gather_hook_and_timed_receive_handled() -> Any:
    async def consume() -> Any:
        return await handle_message(await receive("v", timeout="1h"))

    return await asyncio.gather(hook("h"), consume())


async def _gather_hook_and_yielding_consumer() -> Any:
    async def consume() -> Any:
        message = await receive("v")
        for _ in range(5):
            await asyncio.sleep(0)
        return await handle_message(message)

    return await asyncio.gather(hook("h"), consume())


LEFT_RUNNING = [
    against_stop("reads_left_running_timed", _gather_hook_and_timed_receive_handled),
    against_stop("reads_left_running_yields", _gather_hook_and_yielding_consumer),
]


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
@pytest.mark.parametrize("wf", LEFT_RUNNING, ids=["timed", "yields"])
async def test_a_message_handled_by_a_task_the_branch_left_running_is_not_given_back(
    rt: Runtime, worker: Worker, wf: Any, full: bool
) -> None:
    """ "a" comes while "stop" is unanswered: the gathered task handles it (a step, recorded).
    Then stop: "a" was handled; the run's receive must wait for "b"."""
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await message_then_stop(rt, w, wf)
    assert handled == ["a"], handled
    info = await rt.get_run(run_id)
    assert info.status is not RunStatus.COMPLETED, (info.status, handled)
    await rt.send(run_id, "v", "b")
    await w.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "handled b"]
    assert handled == ["a", "b"]


# A chain of tasks each awaiting the one before, the branch waiting for the last without
# reading it: nothing went on from the message, which goes to the run's receive. (Each
# await of a pending task notes two reads; walked once per path, deciding took ~2^n: 12 s
# for 22 tasks.)

CHAIN = 12


async def _pass_on(task: Any) -> Any:
    value = await task
    await asyncio.sleep(0)
    return value


async def _chain_of_readers() -> Any:
    task: Any = asyncio.ensure_future(receive("v"))
    for _ in range(CHAIN):
        task = asyncio.ensure_future(_pass_on(task))
    await asyncio.wait([task])  # (reads no result)
    return await hook("h")


CHAINED = against_stop("reads_chain_of_readers", _chain_of_readers)


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
async def test_a_message_passed_along_a_chain_of_tasks_nobody_used_goes_back(
    rt: Runtime, worker: Worker, full: bool
) -> None:
    handled.clear()
    run_id = await message_then_stop(rt, cached_or_full(rt, worker, full), CHAINED)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error)
    assert await rt.wait(run_id, timeout=5) == [0, "handled a"]


# A branch starts a task, receives, then awaits the task: reading the task's result is
# not a use of the message. Stop is answered, then the task's hook, before the worker runs
# the run again. (The read was the branch's last entry, so the receive before it counted
# as used, and the losing branch kept a message nothing had used: the run waited for
# ever.) Found by the model-based test, test_first_model.py.


async def _start_task_receive_then_read_it() -> Any:
    waiting = asyncio.ensure_future(hook("h"))
    message = await receive("v")
    return [await waiting, message]


READ_AFTER = against_stop("reads_task_after_receive", _start_task_receive_then_read_it)


@pytest.mark.parametrize("full", [False, True], ids=["cached", "full"])
async def test_a_message_received_before_reading_a_task_goes_back_when_the_branch_loses(
    rt: Runtime, worker: Worker, full: bool
) -> None:
    handled.clear()
    w = cached_or_full(rt, worker, full)
    run_id = await rt.start(READ_AFTER)
    await w.drain()
    await rt.send(run_id, "v", "a")
    await w.drain()
    await answer(rt, "stop", 1)
    await answer(rt, "h", 2)
    await w.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, handled)
    assert await rt.wait(run_id, timeout=5) == [0, "handled a"]
    assert handled == ["a"]


async def test_a_task_a_suspension_ended_is_not_logged_as_an_error(
    rt: Runtime, worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    """A task the branch started and never awaited ends with the suspension of its
    receive: not an error, so asyncio's "exception was never retrieved" is not logged (it
    came from the task's finalizer, once inside an unrelated compile(), where CPython 3.11
    raised SystemError)."""
    handled.clear()
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        run_id = await message_then_stop(rt, worker, LISTEN[0])
        assert await rt.wait(run_id, timeout=5) == [0, "handled a"]
        await rt.start(LISTEN[0])  # a run that suspends with the task's receive waiting
        await worker.drain()
        gc.collect()
    assert "never retrieved" not in caplog.text

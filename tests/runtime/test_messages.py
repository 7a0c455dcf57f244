"""Messages between runs: Runtime.send and receive(topic) — buffered when sent early,
delivered at once to a run that waits, each received once, in order."""

from __future__ import annotations

import asyncio

import pytest

from runtime import (
    STEP_HOOK_TIMEOUT,
    MessageTimeout,
    RunFinished,
    RunNotFound,
    RunStatus,
    Runtime,
    Worker,
    first,
    receive,
    sleep,
    step,
    workflow,
)
from tests.raw_redis import rewrite_decisions


@workflow(name="inbox_wf")
async def inbox_wf() -> list[object]:
    first = await receive("order")
    second = await receive("order")
    return [first, second]


async def test_a_message_sent_before_and_one_after_are_each_received_once(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(inbox_wf)
    await rt.send(run_id, "order", {"n": 1})  # before the run even began: buffered
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED  # waits for the second
    await rt.send(run_id, "order", {"n": 2})  # after: delivered to the waiting run
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [{"n": 1}, {"n": 2}]
    received = [e.data for e in await rt.events(run_id) if e.type == "message.received"]
    assert received == [
        {"topic": "order", "payload": {"n": 1}},
        {"topic": "order", "payload": {"n": 2}},
    ]
    with pytest.raises(RunFinished):
        await rt.send(run_id, "order", {"n": 3})


async def test_messages_wait_in_order_and_other_topics_do_not_mix(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(inbox_wf)
    await rt.send(run_id, "other", "ignored")
    await rt.send(run_id, "order", "a")
    await rt.send(run_id, "order", "b")
    await rt.send(run_id, "order", "c")  # never received: dropped with the run's keys
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["a", "b"]
    with pytest.raises(RunNotFound):
        await rt.send("r-" + "0" * 24, "order", 1)


@step
async def notify(run_id: str) -> None:
    # From a workflow, a message is sent inside a step (recorded once it returned).
    from tests.runtime.test_messages import runtime_of_the_test

    await runtime_of_the_test[0].send(run_id, "order", "from a run")


@workflow(name="sender_wf")
async def sender_wf(target: str) -> str:
    await notify(target)
    return "sent"


runtime_of_the_test: list[Runtime] = []


async def test_a_run_sends_to_another(rt: Runtime, worker: Worker) -> None:
    runtime_of_the_test[:] = [rt]
    receiver = await rt.start(inbox_wf)
    await worker.drain()
    await rt.start(sender_wf, receiver)
    await rt.send(receiver, "order", "from outside")
    await worker.drain()
    result = await rt.wait(receiver, timeout=5)
    assert sorted(result) == ["from a run", "from outside"]


@workflow(name="timed_inbox_wf")
async def timed_inbox_wf() -> object:
    got = await receive("ping", timeout="300ms", on_timeout="return")
    if got is STEP_HOOK_TIMEOUT:
        try:
            await receive("ping", timeout="200ms")
        except MessageTimeout:
            return "timed out twice"
    return got


async def test_receive_times_out_durably(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(timed_inbox_wf)
    await worker.drain()
    await asyncio.sleep(0.35)
    await worker.drain()
    await asyncio.sleep(0.25)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "timed out twice"
    late = await rt.start(timed_inbox_wf)
    await worker.drain()
    await rt.send(late, "ping", "pong")
    await worker.drain()
    assert await rt.wait(late, timeout=5) == "pong"


@workflow(name="nudging_inbox_wf")
async def nudging_inbox_wf() -> list[object]:
    """A chat's usual loop: wait for the visitor's message, nudge them after a while of
    silence, and keep waiting."""
    got: list[object] = []
    while len(got) < 2:
        message = await receive("visitor", timeout="200ms", on_timeout="return")
        if message is STEP_HOOK_TIMEOUT:
            got.append("nudged")
        else:
            got.append(message)
    return got


async def test_a_message_after_a_timed_out_receive_goes_to_the_next_receive(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(nudging_inbox_wf)
    await worker.drain()
    await asyncio.sleep(0.3)  # the first receive times out: the run waits in the second
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await rt.send(run_id, "visitor", "hello")  # taken by the receive that waits now
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["nudged", "hello"]


@workflow(name="nudged_then_two_wf")
async def nudged_then_two_wf() -> list[object]:
    got = await receive("visitor", timeout="200ms", on_timeout="return")
    nudged = "nudged" if got is STEP_HOOK_TIMEOUT else got
    return [nudged, await receive("visitor"), await receive("visitor")]


async def test_messages_after_a_timed_out_receive_are_received_in_the_order_sent(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(nudged_then_two_wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.drain()
    await rt.send(run_id, "visitor", 1)
    await rt.send(run_id, "visitor", 2)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["nudged", 1, 2]


@workflow(name="nudged_once_wf")
async def nudged_once_wf() -> list[object]:
    got = await receive("visitor", timeout="200ms", on_timeout="return")
    if got is not STEP_HOOK_TIMEOUT:
        return [got]
    return ["nudged", await receive("visitor")]


async def test_a_message_that_came_just_after_the_timeout_goes_to_the_next_receive(
    rt: Runtime, worker: Worker
) -> None:
    """The timer fired, then the message came, and both are in the log when the run is
    replayed: the timeout wins, and the receive that follows takes the message at once."""
    run_id = await rt.start(nudged_once_wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.fire_due()  # the timer fires; no worker has run the run since
    await rt.send(run_id, "visitor", "hello")
    assert await _ends_in_log(rt, run_id) == ["timer.fired", "message.received"]
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["nudged", "hello"]


async def test_a_message_that_came_just_before_the_timeout_wins_over_it(
    rt: Runtime, worker: Worker
) -> None:
    """The message came, then the timer fired, before any worker replayed the run: the
    first to come wins, as for a hook's answer."""
    run_id = await rt.start(nudged_once_wf)
    await worker.drain()
    await rt.send(run_id, "visitor", "hello")
    await asyncio.sleep(0.3)
    await worker.fire_due()
    assert await _ends_in_log(rt, run_id) == ["message.received", "timer.fired"]
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["hello"]


async def _ends_in_log(rt: Runtime, run_id: str) -> list[str]:
    """The run's log's events that end a wait, in the order they came."""
    ends = {"timer.fired", "message.received"}
    return [e.type for e in await rt.events(run_id) if e.type in ends]


async def test_a_log_decided_before_withdrawn_receives_took_none_replays_as_it_ran(
    rt: Runtime, worker: Worker
) -> None:
    """A decision recorded by the code before this fix (no ``receives`` in it): its
    withdrawn receive still counts as the one that took the first message, as when the
    run's later receives returned what they did."""
    run_id = await rt.start(nudged_then_two_wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.drain()
    decided = [e for e in await rt.events(run_id) if e.type == "first.decided"]
    assert [e.data.get("receives") for e in decided] == [["m1_0.0.visitor"]]
    await _as_decided_before_the_fix(rt, run_id)
    for n in (1, 2, 3):
        await rt.send(run_id, "visitor", n)
    await Worker(rt).drain()  # a worker that did not keep the run's index
    assert await rt.wait(run_id, timeout=5) == ["nudged", 2, 3]


async def _as_decided_before_the_fix(rt: Runtime, run_id: str) -> None:
    """Rewrite the run's log, ids kept, with its decisions as the code before this fix
    recorded them: without the ``receives`` that take no message (nor the later ``kept``)."""

    def before_the_fix(data: dict[str, object]) -> None:
        del data["receives"], data["kept"]

    await rewrite_decisions(rt, run_id, before_the_fix)


handled: list[object] = []


@step
async def handle_message(message: object) -> str:
    handled.append(message)
    return f"handled {message}"


async def _receive_and_handle() -> str:
    return await handle_message(await receive("visitor"))


@workflow(name="handled_in_a_losing_branch_wf")
async def handled_in_a_losing_branch_wf() -> list[object]:
    which, _ = await first(_receive_and_handle(), sleep("200ms"))
    return [which, await receive("visitor")]


async def test_a_message_a_losing_branch_handed_to_a_step_is_not_received_again(
    rt: Runtime, worker: Worker
) -> None:
    """The timer fired, then the message came; the branch that received it lost, but its
    step had handled the message already: the next receive takes the next message, not
    that one again. (A review found it handled twice.)"""
    handled.clear()
    run_id = await rt.start(handled_in_a_losing_branch_wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.fire_due()
    await rt.send(run_id, "visitor", "first")
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await rt.send(run_id, "visitor", "second")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [1, "second"]
    assert handled == ["first"]

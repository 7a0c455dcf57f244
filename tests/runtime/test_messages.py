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
    receive,
    step,
    workflow,
)


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

"""Messages between runs: Runtime.send and receive(topic) — buffered when sent early,
delivered at once to a run that waits, each received once, in order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import runtime.client
from runtime import (
    STEP_HOOK_TIMEOUT,
    MessageTimeout,
    RunFinished,
    RunNotFound,
    RunStatus,
    Runtime,
    Worker,
    first,
    hook,
    receive,
    sleep,
    step,
    workflow,
)
from runtime.models import LOG_FORMAT, LOG_SCOPED
from tests.apps.messages_app import handle_message, handled
from tests.raw_redis import as_recorded_before_takes, rewrite_log


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
    recorded them: without the ``receives`` that take no message, and with no record of
    what each receive took (which came later)."""

    def before_the_fix(event_type: str, data: dict[str, Any]) -> dict[str, Any] | None:
        if event_type == "first.decided":
            del data["receives"]
        return as_recorded_before_takes(event_type, data)

    await rewrite_log(rt, run_id, before_the_fix)


async def _receive_and_handle() -> str:
    return await handle_message(await receive("visitor"))


@workflow(name="handled_in_a_losing_branch_wf")
async def handled_in_a_losing_branch_wf() -> list[object]:
    which, _ = await first(_receive_and_handle(), sleep("200ms"))
    return [which, await receive("visitor")]


async def _timed_out_then_sent(rt: Runtime, worker: Worker, wf: Any, message: str) -> str:
    """Start ``wf``, let its first receive (a first() with a 200 ms timer) time out, send
    ``message`` before any worker replays the run, then run it: the new run's id."""
    run_id = await rt.start(wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.fire_due()
    await rt.send(run_id, "visitor", message)
    await worker.drain()
    return run_id


async def test_a_message_a_losing_branch_handed_to_a_step_is_not_received_again(
    rt: Runtime, worker: Worker
) -> None:
    """The timer fired, then the message came; the branch that received it lost, but its
    step had handled the message already: the next receive takes the next message, not
    that one again. (A review found it handled twice.)"""
    handled.clear()
    run_id = await _timed_out_then_sent(rt, worker, handled_in_a_losing_branch_wf, "first")
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await rt.send(run_id, "visitor", "second")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [1, "second"]
    assert handled == ["first"]


@step
async def arrive_late() -> str:
    await asyncio.sleep(0.2)
    return "arrived"


async def _late_listener() -> str:
    await arrive_late()  # slow in the pass that runs it, at once in every replay
    return await handle_message(await receive("visitor"))


async def _early_listener() -> str:
    await asyncio.sleep(0.1)  # (not durable: as long in every pass)
    return await handle_message(await receive("visitor"))


@workflow(name="two_listeners_wf")
async def two_listeners_wf() -> list[object]:
    # the timer fires, then a message comes before any worker replays the run: the receive
    # is withdrawn, and the message waits in the log for the next receive
    await first(receive("visitor"), sleep("200ms"))
    return list(await asyncio.gather(_late_listener(), _early_listener()))


async def test_receives_of_one_topic_in_parallel_tasks_keep_the_messages_they_took(
    rt: Runtime, worker: Worker
) -> None:
    """Two tasks receive one topic: the early one takes the first message in the pass
    where the late one is still in its step; in the next pass the late one's step returns at
    once and it reaches its receive first. It takes the second message, not the first
    again. Before, the first message was handled twice and the run blocked (the early
    task's step was recorded with the first message, and now got the second)."""
    handled.clear()
    run_id = await _timed_out_then_sent(rt, worker, two_listeners_wf, "first")
    assert handled == ["first"]
    await rt.send(run_id, "visitor", "second")
    await worker.drain()
    await Worker(rt).drain()  # and a worker that replays the whole log
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, info.error
    assert await rt.wait(run_id, timeout=5) == ["handled second", "handled first"]
    assert handled == ["first", "second"]
    taken = [e.data for e in await rt.events(run_id) if e.type == "message.taken"]
    assert [(t["wait"].split(".", 1)[0], t["n"]) for t in taken] == [
        ("m1_0", 0),  # the first()'s receive, which gives it back
        ("m1_3", 0),
        ("m1_2", 1),
    ]


async def test_each_receive_records_the_message_it_took_once(rt: Runtime, worker: Worker) -> None:
    """One ``message.taken`` per message a receive took, written by the pass that handed
    it out; a replay writes none again."""
    run_id = await rt.start(inbox_wf)
    await rt.send(run_id, "order", 1)
    await worker.drain()
    await rt.send(run_id, "order", 2)
    await worker.drain()
    await Worker(rt).drain()
    assert await rt.wait(run_id, timeout=5) == [1, 2]
    taken = [e.data for e in await rt.events(run_id) if e.type == "message.taken"]
    assert taken == [
        {"wait": "m0.order", "topic": "order", "n": 0},
        {"wait": "m1.order", "topic": "order", "n": 1},
    ]


async def _late_listener_with_a_timeout() -> str:
    await arrive_late()
    return await handle_message(await receive("visitor", timeout="1h"))


async def _early_listener_with_a_timeout() -> str:
    await asyncio.sleep(0.1)  # (not durable: as long in every pass)
    return await handle_message(await receive("visitor", timeout="1h"))


@workflow(name="two_listeners_with_timeouts_wf")
async def two_listeners_with_timeouts_wf() -> list[object]:
    await first(receive("visitor"), sleep("200ms"))
    return list(
        await asyncio.gather(_late_listener_with_a_timeout(), _early_listener_with_a_timeout())
    )


async def _late_task() -> str:
    await arrive_late()
    return await handle_message(await receive("visitor"))


@workflow(name="listener_beside_its_task_wf")
async def listener_beside_its_task_wf() -> list[object]:
    await first(receive("visitor"), sleep("200ms"))
    task = asyncio.create_task(_late_task())
    await asyncio.sleep(0.1)  # (not durable: as long in every pass)
    mine = await handle_message(await receive("visitor"))
    return [mine, await task]


@pytest.mark.parametrize(
    ("wf", "result"),
    [
        # a receive with a timeout is a first() of the receive and a timer
        (two_listeners_with_timeouts_wf, ["handled second", "handled first"]),
        # the workflow's own receive against a task it created
        (listener_beside_its_task_wf, ["handled first", "handled second"]),
    ],
)
async def test_receives_that_race_keep_the_messages_they_took(
    rt: Runtime, worker: Worker, wf: Any, result: list[str]
) -> None:
    """As the two listeners above, where one receive has a timeout, or is the workflow's
    own. (A review found both blocked by a version that recorded only the takes of a task's
    receive outside any first().)"""
    handled.clear()
    run_id = await _timed_out_then_sent(rt, worker, wf, "first")
    assert handled == ["first"]
    await rt.send(run_id, "visitor", "second")
    await worker.drain()
    await Worker(rt).drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, info.error
    assert await rt.wait(run_id, timeout=5) == result
    assert handled == ["first", "second"]


async def _receive_then_linger() -> object:
    message = await receive("visitor")
    await asyncio.sleep(0.1)  # (not durable: the other task takes its message meanwhile)
    return message


async def _nudged() -> int:
    which, _ = await first(_receive_then_linger(), sleep("300ms"))
    return which


@step
async def long_step() -> str:
    await asyncio.sleep(0.6)
    return "done"


async def _after_the_go() -> object:
    await hook("go")
    await long_step()
    await asyncio.sleep(0.02)  # (not durable: reached after the other receive, every pass)
    return await handle_message(await receive("visitor"))


@workflow(name="given_back_beside_another_wf")
async def given_back_beside_another_wf() -> list[object]:
    nudged, other = await asyncio.gather(_nudged(), _after_the_go())
    mine = await handle_message(await receive("visitor"))
    await hook("next")
    return [nudged, other, mine]


async def test_a_message_given_back_goes_to_the_next_receive_whatever_was_taken_since(
    rt: Runtime, worker: Worker
) -> None:
    """The timer of a first() fires while a pass runs, and two messages come: the first()'s
    receive gives its message back after another task's receive took the next; the run's
    own receive takes the one given back. (A review found it skipped: the count of the
    topic went back one from the other task's number, and the run waited with the message
    unread in its log; before the messages were recorded, a message was handled twice.)"""
    handled.clear()
    run_id = await rt.start(given_back_beside_another_wf)
    await worker.drain()
    [go] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == "go"]
    await rt.resume_hook(go.token, 1)
    draining = asyncio.ensure_future(worker.drain())  # long_step takes 0.6 s
    await asyncio.sleep(0.4)
    await Worker(rt).fire_due()  # the first()'s timer fires while the pass runs
    await rt.send(run_id, "visitor", "first")
    await rt.send(run_id, "visitor", "second")
    await draining
    await worker.drain()
    await Worker(rt).drain()
    assert sorted(map(str, handled)) == ["first", "second"]
    assert [h.name for h in await rt.list_hooks(run_id=run_id)] == ["next"]


async def _ask_and_listen() -> object:
    return await asyncio.gather(hook("h"), receive("visitor"))  # its receive takes "a"


@workflow(name="given_back_then_two_wf")
async def given_back_then_two_wf() -> list[object]:
    which, _ = await first(hook("stop"), _ask_and_listen())
    a = await handle_message(await receive("visitor"))
    b = await handle_message(await receive("visitor"))
    return [which, a, b]


async def test_a_message_given_back_is_taken_by_one_receive(rt: Runtime, worker: Worker) -> None:
    """A branch's receive took a message in one pass and gives it back when its branch
    loses in a later one: the next receive takes it, and the one after waits for the next
    message. (A review found both took it: handled twice, the next message never read.)"""
    handled.clear()
    run_id = await rt.start(given_back_then_two_wf)
    await rt.send(run_id, "visitor", "a")
    await worker.drain()
    [stop] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == "stop"]
    await rt.resume_hook(stop.token, 1)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await rt.send(run_id, "visitor", "b")
    await worker.drain()
    await Worker(rt).drain()
    assert await rt.wait(run_id, timeout=5) == [0, "handled a", "handled b"]
    assert handled == ["a", "b"]


async def _with_a_timeout() -> int:
    which, _ = await first(receive("visitor"), sleep("300ms"))
    return which


async def _right_after() -> object:
    await asyncio.sleep(0)  # (not durable: reached just after the other receive, every pass)
    return await handle_message(await receive("visitor"))


@workflow(name="given_back_to_a_waiting_receive_wf")
async def given_back_to_a_waiting_receive_wf() -> list[object]:
    return list(await asyncio.gather(_with_a_timeout(), _right_after()))


@pytest.mark.parametrize("log_format", [LOG_SCOPED, LOG_FORMAT])
async def test_a_message_given_back_goes_to_a_receive_that_suspended_in_the_pass(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch, log_format: int
) -> None:
    """The timer fires, then a message comes, before the next pass: in it the timed receive
    takes the message, the other receive suspends on the next, and the timeout wins: the
    pass runs again, and the other receive takes the message given back. Also in a run
    recorded before receives recorded their messages. (A review found the run suspended
    with the message unread.)"""
    monkeypatch.setattr(runtime.client, "LOG_FORMAT", log_format)  # what the start records
    handled.clear()
    run_id = await rt.start(given_back_to_a_waiting_receive_wf)
    await worker.drain()
    await asyncio.sleep(0.35)
    await worker.fire_due()
    await rt.send(run_id, "visitor", "a")
    await worker.drain()
    await Worker(rt).drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, info.error
    assert await rt.wait(run_id, timeout=5) == [1, "handled a"]


_sender_of: dict[str, Any] = {}  # "rt" and "run": where the sending step sends


@step
async def send_to_this_run(payload: str) -> str:
    await _sender_of["rt"].send(_sender_of["run"], "visitor", payload)
    return "sent"


@step
async def next_step() -> str:
    return "next"


async def _listen() -> object:
    return await handle_message(await receive("visitor"))  # reached first: message 0


async def _decided_before() -> int:
    await asyncio.sleep(0.01)  # (not durable: after the other receive, in every pass)
    which, _ = await first(hook("stop"), receive("visitor"))  # its receive: message 1
    return which


async def _send_in_the_pass() -> object:
    await hook("go")
    await asyncio.sleep(0.03)  # (not durable)
    await send_to_this_run("m")  # straight to the log: the run last waited on the topic
    await next_step()  # the write before it brings "m" back into the pass
    return await hook("h")


@workflow(name="old_decision_beside_a_listener_wf")
async def old_decision_beside_a_listener_wf() -> list[object]:
    return list(await asyncio.gather(_listen(), _decided_before(), _send_in_the_pass()))


def _before_decisions_listed_receives(event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    if event_type == "first.decided":
        data.pop("receives", None)
    return data


async def test_an_old_run_whose_message_came_in_the_pass_takes_it(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run recorded before receives recorded their messages, with a decision recorded
    before decisions listed their receives (its losing receive takes a number in every
    replay, after the receive that waits): a message that a write of the pass brings back
    is the waiting receive's, and the pass runs again instead of suspending. (A review
    found the run suspended with the message unread, nothing to wake it.)"""
    monkeypatch.setattr(runtime.client, "LOG_FORMAT", LOG_SCOPED)
    handled.clear()
    run_id = await rt.start(old_decision_beside_a_listener_wf)
    _sender_of.update(rt=rt, run=run_id)
    await worker.drain()
    [stop] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == "stop"]
    await rt.resume_hook(stop.token, 0)
    await Worker(rt).drain()  # decided: stop won
    await rewrite_log(rt, run_id, _before_decisions_listed_receives)
    [go] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == "go"]
    await rt.resume_hook(go.token, 1)
    await Worker(rt).drain()
    await Worker(rt).drain()
    assert handled == ["m"]

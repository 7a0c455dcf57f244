"""continue_as_new: a run hands its state to a fresh run of the same workflow, with an
empty log, the same session (which follows it) and tags, linked both ways; the old run's
pending hooks close; Runtime.wait follows the chain. Against the embedded store and real
Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime import (
    HookStatus,
    RunStatus,
    Runtime,
    UsageError,
    Worker,
    continue_as_new,
    first,
    hook,
    receive,
    sleep,
    step,
    step_hook,
)
from runtime import workflow as workflow_
from runtime.ids import make_token
from runtime.store.redis._executions import ExecutionStore
from tests.apps import children_app  # noqa: F401  # parent_of_waiting_wf
from tests.apps.messages_app import handle_message, handled
from tests.helpers import finishes_with_a_child_of_its_own
from tests.raw_redis import raw


@step
async def ask_turn(turn: int) -> Any:
    return await step_hook("answer")


@workflow_(name="endless_chat")
async def endless_chat(turn: int, memory: list[str]) -> Any:
    answer = await ask_turn(turn)
    memory = [*memory, answer][-2:]
    if answer == "bye":
        return {"turns": turn + 1, "memory": memory}
    continue_as_new(turn + 1, memory)


async def _answer(rt: Runtime, run_id: str, text: str, worker: Worker) -> None:
    await rt.resume_hook(make_token(run_id, "ask_turn-0.answer.0"), text)
    await worker.drain()


async def test_a_conversation_continues_in_fresh_runs(rt: Runtime) -> None:
    worker = Worker(rt)
    session = "session-continue-as-new"
    first_id = await rt.start(endless_chat, 0, [], session=session, tags={"customer": "acme"})
    await rt.store.bind_session(session, first_id, 3600)
    await worker.drain()
    runs = [first_id]
    for text in ("hello", "again", "more"):
        await _answer(rt, runs[-1], text, worker)
        old = await rt.get_run(runs[-1])
        assert old.status is RunStatus.CONTINUED and old.continued_to is not None
        assert old.status.finished
        new = await rt.get_run(old.continued_to)
        assert new.continued_from == runs[-1]
        assert new.session == session and new.tags == {"customer": "acme"}
        assert new.workflow == "endless_chat"
        # the session follows the conversation to its new run
        assert await rt.store.session_run(session) == new.run_id
        runs.append(new.run_id)
        # a fresh log: its input is what the old run handed over, then this turn's wait
        events = await rt.events(new.run_id)
        assert events[0].type == "workflow.started"
        assert events[0].data["args"][0] == len(runs) - 1
        assert len(events) <= 5, [e.type for e in events]
    assert (await rt.events(runs[0]))[-1].type == "workflow.continued"
    assert [r.run_id for r in await rt.list_runs(tag=("customer", "acme"))].count(runs[-1]) == 1
    await _answer(rt, runs[-1], "bye", worker)
    # wait() on the first run follows the chain to the last run's result
    assert await rt.wait(runs[0], timeout=5) == {"turns": 4, "memory": ["more", "bye"]}


@workflow_(name="continue_with_a_pending_hook")
async def continue_with_a_pending_hook(round_: int) -> Any:
    if round_ == 1:
        return "done"
    # the hook loses to the timer (first() withdraws it): nothing of this run stays pending
    await first(hook("never"), sleep(0.01))
    continue_as_new(round_ + 1)


async def test_the_old_runs_pending_hooks_close(rt: Runtime) -> None:
    worker = Worker(rt, timer_tick=0.005)
    run_id = await rt.start(continue_with_a_pending_hook, 0)
    async with _running(worker):
        assert await rt.wait(run_id, timeout=10) == "done"
    old = await rt.get_run(run_id)
    assert old.status is RunStatus.CONTINUED
    assert all(h.status is not HookStatus.PENDING for h in old.hooks)
    assert await rt.list_hooks() == []


@step
async def continues_inside() -> None:
    continue_as_new()


@workflow_(name="continue_in_a_step")
async def continue_in_a_step() -> None:
    await continues_inside()


async def test_continue_as_new_is_for_the_workflow_body(rt: Runtime) -> None:
    worker = Worker(rt)
    run_id = await rt.start(continue_in_a_step)
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED
    assert info.error is not None and "workflow body" in info.error["message"]
    with pytest.raises(UsageError):
        continue_as_new()


def _running(worker: Worker) -> Any:
    from tests.helpers import running

    return running(worker)


async def _expire(rt: Runtime, run_id: str) -> None:
    """As if the run's retention had passed: its keys are gone, its id free again."""
    client = raw(rt).client
    for key in await client.keys(f"*:run:{run_id}*"):
        await client.delete(key)


async def test_a_run_id_used_again_continues_into_a_successor_of_its_own(rt: Runtime) -> None:
    """conv-1 continued to B and expired while B lives on; a new conv-1 continues into a
    new successor, not into B. Before, the successor's id derived from the run id alone:
    B's, whose creation then failed, and the new conv-1 ended 'continued' into the old
    conversation."""
    worker = Worker(rt)
    first = await rt.start(endless_chat, 0, [], run_id="conv-1")
    await worker.drain()
    await _answer(rt, first, "hello", worker)
    old_successor = (await rt.get_run(first)).continued_to
    assert old_successor is not None
    await _expire(rt, first)
    again = await rt.start(endless_chat, 100, ["new"], run_id="conv-1")
    await worker.drain()
    await _answer(rt, again, "hi again", worker)
    successor = (await rt.get_run(again)).continued_to
    assert successor not in (None, old_successor)
    assert (await rt.get_run(successor)).continued_from == "conv-1"
    assert (await rt.events(successor))[0].data["args"] == [101, ["new", "hi again"]]
    assert (await rt.events(old_successor))[0].data["args"] == [1, ["hello"]]  # untouched


async def test_a_run_id_used_again_starts_children_of_its_own(rt: Runtime) -> None:
    """The same for a child: the new parent-1 starts its own child, not the earlier
    parent-1's (cancelled with it and still kept)."""
    worker = Worker(rt)
    parent = await rt.start("parent_of_waiting_wf", run_id="parent-1")
    await worker.drain()
    [old_child] = (await rt.get_run(parent)).child_run_ids
    await rt.cancel(parent)
    await _expire(rt, parent)
    again = await rt.start("parent_of_waiting_wf", run_id="parent-1")
    await finishes_with_a_child_of_its_own(rt, worker, again, old_child)


# -- messages across continue_as_new -------------------------------------------------------


@workflow_(name="message_turns")
async def message_turns(turn: int) -> Any:
    """One message a turn, each turn a fresh run, until "end"."""
    message = await receive("v")
    if message == "end":
        return turn
    await handle_message(message)
    continue_as_new(turn + 1)


async def _last_run(rt: Runtime, run_id: str) -> str:
    while (info := await rt.get_run(run_id)).continued_to is not None:
        run_id = info.continued_to
    return run_id


async def test_messages_waiting_for_a_receive_go_on_to_the_successor(rt: Runtime) -> None:
    """Three messages sent before the run's first pass: the run takes one and continues,
    the two still in its inbox wait for its successor's receives. Before, they were
    deleted with the old run's inbox (the send had returned: an acknowledged message lost)
    and the successor waited for ever."""
    handled.clear()
    worker = Worker(rt)
    run_id = await rt.start(message_turns, 0)
    for message in ("m0", "m1", "end"):
        await rt.send(run_id, "v", message)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 2
    assert handled == ["m0", "m1"]


async def test_a_message_sent_to_a_run_that_continued_reaches_its_successor(
    rt: Runtime,
) -> None:
    """A sender that holds the conversation's first run id (a webhook, say) keeps using
    it: the message goes to the run the chain has reached, as Runtime.wait follows it.
    Before, the send raised RunFinished ("run already continued")."""
    handled.clear()
    worker = Worker(rt)
    run_id = await rt.start(message_turns, 0)
    await worker.drain()
    for message in ("m0", "m1", "m2"):
        await rt.send(run_id, "v", message)
        await worker.drain()
    assert handled == ["m0", "m1", "m2"]
    assert (await rt.get_run(run_id)).status is RunStatus.CONTINUED
    await rt.send(run_id, "v", "end")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 3
    assert (await rt.get_run(await _last_run(rt, run_id))).status is RunStatus.COMPLETED


async def _receive_and_wait() -> list[Any]:
    return list(await asyncio.gather(receive("v"), hook("h1")))


@workflow_(name="message_given_back_then_continued")
async def message_given_back_then_continued(round_: int) -> Any:
    if round_ == 1:
        return await handle_message(await receive("v"))
    # the receive takes m0 in the first pass, the branch then waits for h1 too; stop wins
    # and the receive, which nothing went on from, gives m0 back to the run
    await first(hook("stop"), _receive_and_wait())
    continue_as_new(round_ + 1)


async def test_a_message_given_back_by_a_losing_branch_goes_on_to_the_successor(
    rt: Runtime,
) -> None:
    """A message in the run's log that no receive kept (a losing branch gave it back)
    goes to the successor's receives. Before, it stayed in the old run's log, unread."""
    handled.clear()
    worker = Worker(rt)
    run_id = await rt.start(message_given_back_then_continued, 0)
    await worker.drain()
    await rt.send(run_id, "v", "m0")
    await worker.drain()
    [stop] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == "stop"]
    await rt.resume_hook(stop.token, 1)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "handled m0"
    assert handled == ["m0"]


@workflow_(name="message_arrives_as_it_continues")
async def message_arrives_as_it_continues(round_: int) -> Any:
    if round_ == 1:
        return [await handle_message(await receive("v")) for _ in range(2)]
    # suspended on both: the run waits for "v", so a message sent now goes to its log
    which, _ = await first(receive("v"), hook("go"))
    assert which == 1
    continue_as_new(round_ + 1)


async def test_a_message_that_arrives_as_the_run_continues_goes_on_to_the_successor(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run waits for "v" (so a send goes straight to its log); "go" is answered and
    the pass continues as new; a message sent between the worker's read of the log and
    its final write lands in the log behind it. It goes on to the successor, with the one
    sent after. Before, it stayed in the ended run's log, unread."""
    handled.clear()
    original = ExecutionStore.apply
    sent: list[str] = []

    async def send_before_the_end(self: ExecutionStore, *args: Any, **kwargs: Any) -> Any:
        finish = kwargs.get("finish")
        if finish is not None and finish.status is RunStatus.CONTINUED and not sent:
            sent.append("m0")
            await rt.send(args[0], "v", "m0")
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(ExecutionStore, "apply", send_before_the_end)
    worker = Worker(rt)
    run_id = await rt.start(message_arrives_as_it_continues, 0)
    await worker.drain()
    [go] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == "go"]
    await rt.resume_hook(go.token, 1)
    await worker.drain()
    assert sent == ["m0"]
    assert [e.type for e in await rt.events(run_id)].count("message.received") == 1
    await rt.send(run_id, "v", "m1")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["handled m0", "handled m1"]

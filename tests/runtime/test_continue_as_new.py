"""continue_as_new: a run hands its state to a fresh run of the same workflow, with an
empty log, the same session (which follows it) and tags, linked both ways; the old run's
pending hooks close; Runtime.wait follows the chain. Against the embedded store and real
Redis."""

from __future__ import annotations

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
    sleep,
    step,
    step_hook,
)
from runtime import workflow as workflow_
from runtime.ids import make_token
from tests.apps import children_app  # noqa: F401  # parent_of_waiting_wf
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

"""Child workflows: started once, waited for without a worker, results and errors carried
back, cancel propagated, parent/child links shown."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime import RunStatus, Runtime, Worker, child, first, hook, sleep, step, workflow
from tests.apps import children_app  # noqa: F401  (registers the workflows)
from tests.raw_redis import raw


async def test_a_parent_gets_its_childrens_results(rt: Runtime, worker: Worker) -> None:
    parent = await rt.start("parent_wf", 5)
    await worker.drain()
    assert await rt.wait(parent, timeout=5) == [10, 20]
    info = await rt.get_run(parent)
    assert len(info.child_run_ids) == 2
    for kid in info.child_run_ids:
        kid_info = await rt.get_run(kid)
        assert kid_info.parent_run_id == parent and kid_info.status is RunStatus.COMPLETED
    started = [e.data for e in await rt.events(parent) if e.type == "child.started"]
    assert sorted(s["child_run_id"] for s in started) == info.child_run_ids
    assert (await rt.stats())["started"] == 3  # each child started once


async def test_a_waiting_child_holds_no_worker_and_its_answer_finishes_both(
    rt: Runtime, worker: Worker
) -> None:
    parent = await rt.start("parent_of_waiting_wf")
    await worker.drain()
    assert (await rt.get_run(parent)).status is RunStatus.SUSPENDED
    [kid] = (await rt.get_run(parent)).child_run_ids
    [question] = await rt.list_hooks(run_id=kid)
    await rt.resume_hook(question.token, "from the child")
    await worker.drain()
    assert await rt.wait(parent, timeout=5) == "from the child"


async def test_a_failed_child_raises_in_its_parent(rt: Runtime, worker: Worker) -> None:
    parent = await rt.start("parent_of_failing_wf")
    await worker.drain()
    assert await rt.wait(parent, timeout=5) == "caught: ValueError"


async def test_cancelling_a_parent_cancels_its_children(rt: Runtime, worker: Worker) -> None:
    parent = await rt.start("parent_of_waiting_wf")
    await worker.drain()
    [kid] = (await rt.get_run(parent)).child_run_ids
    await rt.cancel(parent)
    assert (await rt.get_run(kid)).status is RunStatus.CANCELLED
    assert (await rt.stats())["hooks_pending"] == 0
    assert (await rt.stats())["suspended"] == 0


async def test_a_cancelled_child_fails_its_waiting_parent(rt: Runtime, worker: Worker) -> None:
    parent = await rt.start("parent_of_waiting_wf")
    await worker.drain()
    [kid] = (await rt.get_run(parent)).child_run_ids
    await rt.cancel(kid)
    await worker.drain()
    info = await rt.get_run(parent)
    assert info.status is RunStatus.FAILED and info.error is not None
    assert info.error["type"] == "ChildFailed" and "cancelled" in info.error["message"]


async def test_the_cli_and_the_api_show_the_links(rt: Runtime, worker: Worker) -> None:
    parent = await rt.start("parent_wf", 1)
    await worker.drain()
    shown = (await rt.get_run(parent)).to_json()
    assert len(shown["child_run_ids"]) == 2 and shown["parent_run_id"] is None
    kid = (await rt.get_run(shown["child_run_ids"][0])).to_json()
    assert kid["parent_run_id"] == parent


@step
async def fails_at_once() -> None:
    raise ValueError("the parent cannot go on")


@workflow(name="parent_failing_beside_its_child_wf")
async def parent_failing_beside_its_child_wf() -> Any:
    # the step fails first; the child's branch, scheduled already, starts it meanwhile
    return await asyncio.gather(fails_at_once(), child("waiting_kid_wf"))


async def test_a_child_still_running_when_its_parent_ends_is_cancelled(
    rt: Runtime, worker: Worker
) -> None:
    """A parallel branch fails the parent while its child is started: the child is
    cancelled with it, before any worker ran it, and compacted. Before, it ran on for good
    (its prompt pending), out of reach through the ended parent. (A child that lost a
    first() is cancelled earlier, with the decision: below.)"""
    parent = await rt.start(parent_failing_beside_its_child_wf)
    await worker.drain()
    info = await rt.get_run(parent)
    assert info.status is RunStatus.FAILED
    [kid] = info.child_run_ids
    assert (await rt.get_run(kid)).status is RunStatus.CANCELLED
    assert (await rt.stats())["hooks_pending"] == 0
    cancelled = [e.data for e in await rt.events(kid) if e.type == "workflow.cancelled"]
    assert cancelled == [{"reason": "its parent run ended (failed)"}]
    assert await raw(rt).flush_compactions() == 2  # the parent and the child


@workflow(name="racing_then_waiting_parent_wf")
async def racing_then_waiting_parent_wf() -> list[int | str]:
    which, _ = await first(child("waiting_kid_wf"), sleep(0.2))
    return [which, await hook("next")]  # the parent goes on: it does not end with the decision


async def test_a_child_that_lost_its_parents_first_is_cancelled_at_the_decision(
    rt: Runtime, worker: Worker
) -> None:
    """A sleep wins the parent's first() over its child, and the parent goes on (waiting
    on a hook for days, say): the child, which nothing will read, is cancelled in the
    write that records the decision, its hook withdrawn (closed), and compacted, and the
    parent's log gets no child.completed for it. Before, it ran on until the parent ended, its
    prompt pending, its steps spending on an answer nobody would use."""
    session = Runtime.new_session_id()
    parent = await rt.start(racing_then_waiting_parent_wf, session=session)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.drain()
    assert [h.name for h in await rt.list_hooks(run_id=parent)] == ["next"]
    [kid] = (await rt.get_run(parent)).child_run_ids
    # the session (the chat) sees the child's prompt closed, not the conversation stopped
    told = [(m["type"], m["run_id"]) for _, m in await rt.read_outbox(session)]
    assert told == [("prompt", kid), ("closed", kid), ("status", kid), ("prompt", parent)]
    status = [m for _, m in await rt.read_outbox(session) if m["type"] == "status"]
    assert status == [
        {
            "type": "status",
            "status": "cancelled",
            "run_id": kid,
            "reason": "lost_first",
            "continues_in": parent,
        }
    ]
    info = await rt.get_run(kid)
    assert info.status is RunStatus.CANCELLED
    assert [h.status.value for h in info.hooks] == ["closed"]
    assert await rt.list_hooks(run_id=kid) == []
    cancelled = [e.data for e in await rt.events(kid) if e.type == "workflow.cancelled"]
    assert cancelled == [{"reason": "it lost its parent's first()"}]
    assert "child.completed" not in [e.type for e in await rt.events(parent)]
    assert await raw(rt).flush_compactions() == 1  # the child
    [question] = await rt.list_hooks(run_id=parent)
    await rt.resume_hook(question.token, "go on")
    await worker.drain()
    assert await rt.wait(parent, timeout=5) == [1, "go on"]


async def _asks_or_delegates() -> Any:
    return await first(child("waiting_kid_wf"), hook("inner"))


@workflow(name="nested_first_loses_wf")
async def nested_first_loses_wf() -> list[Any]:
    which, _ = await first(_asks_or_delegates(), sleep(0.2))
    return [which, await hook("next")]


async def _delegates_twice() -> Any:
    return await asyncio.gather(child("waiting_kid_wf"), child("waiting_kid_wf"))


@workflow(name="gathered_children_lose_wf")
async def gathered_children_lose_wf() -> list[Any]:
    which, _ = await first(_delegates_twice(), sleep(0.2))
    return [which, await hook("next")]


@pytest.mark.parametrize("wf", [nested_first_loses_wf, gathered_children_lose_wf])
async def test_every_wait_of_a_losing_branch_ends_with_the_decision(
    rt: Runtime, worker: Worker, wf: Any
) -> None:
    """A losing branch that waited on several things at once (a first() nested in it, or
    children gathered): all of its children are cancelled and all of its hooks withdrawn
    with the decision, and the parent completes. Found by review: only the branch's last
    wait was withdrawn (nested: none, its waits were the inner first()'s), the others ran
    on; and a gathered wait, never awaited by the workflow, failed the parent as a loose
    wait once it returned."""
    parent = await rt.start(wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.drain()
    kids = (await rt.get_run(parent)).child_run_ids
    assert kids and all([(await rt.get_run(k)).status is RunStatus.CANCELLED for k in kids])
    [question] = await rt.list_hooks()
    assert (question.run_id, question.name) == (parent, "next")
    await rt.resume_hook(question.token, "go on")
    await worker.drain()
    assert await rt.wait(parent, timeout=5) == [1, "go on"]

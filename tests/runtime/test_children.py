"""Child workflows: started once, waited for without a worker, results and errors carried
back, cancel propagated, parent/child links shown."""

from __future__ import annotations

import asyncio

from runtime import RunStatus, Runtime, Worker, child, first, sleep, workflow
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


@workflow(name="racing_parent_wf")
async def racing_parent_wf() -> int:
    which, _ = await first(child("waiting_kid_wf"), sleep(0.2))
    return which


async def test_a_child_still_running_when_its_parent_ends_is_cancelled(
    rt: Runtime, worker: Worker
) -> None:
    """A sleep wins the parent's first() over its child, and the parent completes: the
    child, still waiting on its hook, is cancelled with it (its hook too), and compacted.
    Before, it stayed suspended for good with its prompt pending, out of reach through the
    ended parent."""
    parent = await rt.start(racing_parent_wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.drain()
    assert await rt.wait(parent, timeout=5) == 1
    [kid] = (await rt.get_run(parent)).child_run_ids
    info = await rt.get_run(kid)
    assert info.status is RunStatus.CANCELLED
    assert [h.status.value for h in info.hooks] == ["cancelled"]
    assert await rt.list_hooks(run_id=kid) == []
    cancelled = [e.data for e in await rt.events(kid) if e.type == "workflow.cancelled"]
    assert cancelled == [{"reason": "its parent run ended (completed)"}]
    assert await raw(rt).flush_compactions() == 2  # the parent and the child

"""Restart from a step: a failed, cancelled or finished run continues as a new run that
keeps the results of the steps before the chosen one."""

from __future__ import annotations

from collections import Counter

import pytest

from runtime import RunStatus, Runtime, UsageError, Worker, hook, step, workflow
from runtime.ids import make_token
from tests.apps import children_app  # noqa: F401  # parent_of_waiting_wf
from tests.helpers import finishes_with_a_child_of_its_own
from tests.runtime.test_continue_as_new import endless_chat

ran: Counter[str] = Counter()
broken = {"charge": True}


@step
async def reserve(order: str) -> str:
    ran["reserve"] += 1
    return f"reserved {order}"


@step
async def price(order: str) -> int:
    ran["price"] += 1
    return 42


@step
async def charge(amount: int) -> str:
    ran["charge"] += 1
    if broken["charge"]:
        raise RuntimeError("the card processor is down")
    return f"charged {amount}"


@workflow(name="order_wf")
async def order_wf(order: str) -> list[str]:
    reserved = await reserve(order)
    amount = await price(order)
    approved = await hook("approve")
    charged = await charge(amount)
    return [reserved, str(amount), str(approved), charged]


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()
    broken["charge"] = True


async def test_a_run_that_failed_at_its_third_step_restarts_from_it(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(order_wf, "A-1")
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    await rt.resume_hook(pending.token, "ok")
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.FAILED
    assert ran == {"reserve": 1, "price": 1, "charge": 1}
    broken["charge"] = False  # the processor is back
    again = await rt.restart(run_id)  # from the step that failed
    await worker.drain()
    assert await rt.wait(again, timeout=5) == ["reserved A-1", "42", "ok", "charged 42"]
    # steps one and two (and the answer) were not done again
    assert ran == {"reserve": 1, "price": 1, "charge": 2}
    old, new = await rt.get_run(run_id), await rt.get_run(again)
    assert old.restarted_as == again and new.restarted_from == run_id
    assert old.status is RunStatus.FAILED  # the old run is left as it was
    assert [h.name for h in new.hooks] == []  # nobody was asked again


async def test_a_restart_from_an_earlier_step_does_it_again(rt: Runtime, worker: Worker) -> None:
    broken["charge"] = False
    run_id = await rt.start(order_wf, "B-2")
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    await rt.resume_hook(pending.token, "ok")
    await worker.drain()
    assert (await rt.wait(run_id, timeout=5))[3] == "charged 42"
    fork = await rt.restart(run_id, from_step="price")  # a completed run, forked
    await worker.drain()
    assert ran == {"reserve": 1, "price": 2, "charge": 1}
    [asked] = await rt.list_hooks(run_id=fork)  # the hook after the step is asked again
    await rt.resume_hook(asked.token, "second")
    await worker.drain()
    assert await rt.wait(fork, timeout=5) == ["reserved B-2", "42", "second", "charged 42"]


async def test_a_cancelled_run_restarts_and_bad_requests_change_nothing(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(order_wf, "C-3")
    await worker.drain()
    await rt.cancel(run_id)
    with pytest.raises(UsageError, match="no step 'nope'"):
        await rt.restart(run_id, from_step="nope")
    assert (await rt.stats())["started"] == 1
    again = await rt.restart(run_id)
    await worker.drain()
    assert (await rt.get_run(again)).status is RunStatus.SUSPENDED  # waits on approve again
    assert ran == {"reserve": 1, "price": 1}
    pending = await rt.start(order_wf, "D-4")  # not executed yet
    with pytest.raises(UsageError, match="cannot be restarted now"):
        await rt.restart(pending)


async def test_a_parent_cancelled_while_its_child_ran_restarts_with_a_child_of_its_own(
    rt: Runtime, worker: Worker
) -> None:
    """The old run's child reports to the old run only: the restarted run does not wait on
    it but starts a child under its own id, and finishes with it. Before, the restart
    copied child.started without its end, and the new run waited on the old child for good."""
    parent = await rt.start("parent_of_waiting_wf")
    await worker.drain()
    [old_child] = (await rt.get_run(parent)).child_run_ids
    await rt.cancel(parent)
    again = await rt.restart(parent)
    await finishes_with_a_child_of_its_own(rt, worker, again, old_child)


async def test_a_restarted_continued_run_does_not_name_the_old_successor(
    rt: Runtime, worker: Worker
) -> None:
    """A run that continued as new, restarted: its log keeps no workflow.continued of the
    old run (which named the old successor); replayed, the new run continues to a
    successor of its own. Before, its log held both, the first naming the old successor."""
    first = await rt.start(endless_chat, 0, [])
    await worker.drain()
    await rt.resume_hook(make_token(first, "ask_turn-0.answer.0"), "hello")
    await worker.drain()
    old_successor = (await rt.get_run(first)).continued_to
    again = await rt.restart(first)
    await worker.drain()
    continued = [e.data for e in await rt.events(again) if e.type == "workflow.continued"]
    assert len(continued) == 1
    assert continued[0]["continued_to"] == (await rt.get_run(again)).continued_to
    assert continued[0]["continued_to"] not in (None, old_successor)

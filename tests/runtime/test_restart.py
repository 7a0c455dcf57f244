"""Restart from a step: a failed, cancelled or finished run continues as a new run that
keeps the results of the steps before the chosen one."""

from __future__ import annotations

from collections import Counter

import pytest

from runtime import RunStatus, Runtime, UsageError, Worker, hook, step, workflow

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

"""A gathered branch that fails beside a gathered wait: ``asyncio.gather`` raises the
failure at once, whatever the order of its arguments and however long the failing branch
took, as it does in real time (the wait's answer would come hours later)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from runtime import (
    RunStatus,
    Runtime,
    StepFailed,
    Worker,
    hook,
    sleep,
    step,
    step_hook,
    workflow,
)
from runtime.engine import branches
from runtime.store.redis._executions import ExecutionStore


@step
async def fails_at_once() -> None:
    raise ValueError("the service said no")


@step
async def fails_after_a_while() -> None:
    await asyncio.sleep(0.05)
    raise ValueError("the service said no, slowly")


@step
async def asks_inside() -> Any:
    return await step_hook("inside")


@workflow(name="gf_hook_then_failing_step")
async def gf_hook_then_failing_step() -> Any:
    return await asyncio.gather(hook("ask"), fails_at_once())


@workflow(name="gf_failing_step_then_hook")
async def gf_failing_step_then_hook() -> Any:
    return await asyncio.gather(fails_at_once(), hook("ask"))


@workflow(name="gf_hook_then_slow_failure")
async def gf_hook_then_slow_failure() -> Any:
    return await asyncio.gather(hook("ask"), fails_after_a_while())


@workflow(name="gf_sleep_then_slow_failure")
async def gf_sleep_then_slow_failure() -> Any:
    return await asyncio.gather(sleep("1h"), fails_after_a_while())


@workflow(name="gf_step_hook_then_slow_failure")
async def gf_step_hook_then_slow_failure() -> Any:
    return await asyncio.gather(asks_inside(), fails_after_a_while())


@pytest.mark.parametrize(
    "wf",
    [
        gf_hook_then_failing_step,
        gf_failing_step_then_hook,
        gf_hook_then_slow_failure,
        gf_sleep_then_slow_failure,
        gf_step_hook_then_slow_failure,
    ],
    ids=["hook_first", "step_first", "slow_failure", "sleep_beside", "step_hook_beside"],
)
async def test_a_step_failing_beside_a_wait_fails_the_run_without_its_answer(
    rt: Runtime, worker: Worker, wf: Any
) -> None:
    """Before, the wait's suspension ended its task first and gather raised it: the run
    suspended with the step's final failure in its log, the person was asked, and the run
    failed only once they had answered (for ever suspended, had they not)."""
    run_id = await rt.start(wf)
    await worker.drain()
    info = await rt.get_run(run_id)
    events = [e.type for e in await rt.events(run_id)]
    assert info.status is RunStatus.FAILED, (info.status, events)
    assert info.error is not None and info.error["type"] == "StepFailed"
    assert "workflow.suspended" not in events and "step.suspended" not in events
    # what the run was waiting on went with its end: nobody is asked, no timer is left
    assert [h.status for h in await rt.list_hooks(run_id=run_id)] in ([], ["cancelled"])
    assert (await rt.stats())["hooks_pending"] == 0
    assert await worker.fire_due() is None  # no deadline left: the sleep's timer went too


@workflow(name="gf_falls_back")
async def gf_falls_back() -> Any:
    try:
        await asyncio.gather(hook("ask"), fails_after_a_while())
    except StepFailed:
        return await hook("fallback")
    return "answered"


async def test_an_except_around_the_gather_runs_without_the_waits_answer(
    rt: Runtime, worker: Worker
) -> None:
    """The workflow's handler of the gather's failure runs in the same execution: here it
    asks a fallback question at once (before, only after the first question's answer)."""
    run_id = await rt.start(gf_falls_back)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    pending = {h.name for h in await rt.list_hooks(run_id=run_id) if h.status == "pending"}
    assert "fallback" in pending


async def _fails_outside_parley() -> None:
    await asyncio.sleep(0.01)  # not a durable call: it takes as long on every replay
    raise ValueError("a failure after an await of the workflow's own")


@workflow(name="gf_branch_failing_after_its_own_await")
async def gf_branch_failing_after_its_own_await() -> Any:
    return await asyncio.gather(hook("ask"), _fails_outside_parley())


async def test_a_branch_failing_after_an_await_of_its_own_fails_the_run_at_once(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a step's failure: the wait holds its suspension back for it all the same (before,
    the run suspended, and the failure came only with the answer)."""
    monkeypatch.setattr(branches, "HOLD_SECONDS", 2.0)  # (its await, on a loaded machine)
    run_id = await rt.start(gf_branch_failing_after_its_own_await)
    await asyncio.wait_for(worker.drain(), timeout=20)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED
    assert info.error is not None and info.error["type"] == "ValueError"


async def _fails_after_the_hold() -> None:
    await asyncio.sleep(0.5)
    raise ValueError("a failure after an await longer than a wait holds back for")


@workflow(name="gf_branch_failing_after_the_hold")
async def gf_branch_failing_after_the_hold() -> Any:
    return await asyncio.gather(hook("ask"), _fails_after_the_hold())


@step
async def fails_after_longer_than_the_hold() -> None:
    await asyncio.sleep(0.5)
    raise ValueError("the service said no, after a long call")


@workflow(name="gf_hook_then_long_step_failure")
async def gf_hook_then_long_step_failure() -> Any:
    return await asyncio.gather(hook("ask"), fails_after_longer_than_the_hold())


@pytest.mark.parametrize(
    ("wf", "error"),
    [(gf_branch_failing_after_the_hold, "ValueError"), (gf_hook_then_long_step_failure, None)],
    ids=["await_outside_parley", "step"],
)
async def test_a_wait_holds_back_for_a_step_however_long_and_for_other_awaits_so_long(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch, wf: Any, error: str | None
) -> None:
    """A step's run is real work that ends by itself (an LLM call): the wait waits for it
    past HOLD_SECONDS, and the run fails at once. Past HOLD_SECONDS of an await that is not
    a step's, the suspension goes on: the run suspends, as asyncio's order has it, once,
    without a loop of passes; the answer then brings the failure (``error``)."""
    monkeypatch.setattr(branches, "HOLD_SECONDS", 0.1)
    run_id = await rt.start(wf)
    await asyncio.wait_for(worker.drain(), timeout=20)
    if error is not None:
        assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
        [pending] = await rt.list_hooks(run_id=run_id)
        assert await rt.resume_hook(pending.token, "yes") is True
        await asyncio.wait_for(worker.drain(), timeout=20)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED, [e.type for e in await rt.events(run_id)]
    assert info.error is not None and info.error["type"] == (error or "StepFailed")


async def _gathers(depth: int) -> Any:
    if depth == 0:
        return await fails_at_once()
    return await asyncio.gather(_gathers(depth - 1))


@workflow(name="gf_failure_gathers_deep")
async def gf_failure_gathers_deep(depth: int) -> Any:
    return await asyncio.gather(hook("ask"), _gathers(depth))


@pytest.mark.parametrize("depth", [1, 2, 4])
async def test_a_failure_gathers_deep_beside_a_wait_fails_the_run_at_once(
    rt: Runtime, worker: Worker, depth: int
) -> None:
    """Each level of gather takes the failure a turn of the loop further. Before, a wait
    waited one turn: from two levels down the run suspended with the step's final failure
    in its log (on the pass that replayed it, the one after the failure was recorded)."""
    run_id = await rt.start(gf_failure_gathers_deep, depth)
    await asyncio.wait_for(worker.drain(), timeout=20)
    info = await rt.get_run(run_id)
    events = [e.type for e in await rt.events(run_id)]
    assert info.status is RunStatus.FAILED, (info.status, events)
    assert info.error is not None and info.error["type"] == "StepFailed"
    assert "workflow.suspended" not in events


@workflow(name="gf_branch_awaits_the_waits_task")
async def gf_branch_awaits_the_waits_task() -> Any:
    asking = asyncio.ensure_future(hook("ask"))

    async def reads_the_answer() -> Any:
        return await asking

    async def reads_both() -> Any:
        return await asyncio.gather(asking, reads_the_answer())

    return await asyncio.gather(asking, reads_the_answer(), reads_both(), hook("other"))


async def test_branches_that_await_a_held_wait_do_not_hold_it_back(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A branch that awaits the wait's own task (directly, or gathering it) can only go on
    once the wait does: the suspension does not wait for it (a deadlock until HOLD_SECONDS,
    made an hour here, would time the drain out)."""
    monkeypatch.setattr(branches, "HOLD_SECONDS", 3600.0)
    run_id = await rt.start(gf_branch_awaits_the_waits_task)
    await asyncio.wait_for(worker.drain(), timeout=10)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    hooks = {h.name: h for h in await rt.list_hooks(run_id=run_id)}
    assert sorted(hooks) == ["ask", "other"]
    for name in ("ask", "other"):
        assert await rt.resume_hook(hooks[name].token, name.upper()) is True
    await asyncio.wait_for(worker.drain(), timeout=10)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED
    assert info.result == ["ASK", "ASK", ["ASK", "ASK"], "OTHER"]


@workflow(name="gf_returns_past_its_wait")
async def gf_returns_past_its_wait() -> Any:
    try:
        await asyncio.gather(hook("ask"), fails_at_once())
    except StepFailed:
        return "fallback"
    return "answered"


async def test_returning_while_the_gathers_wait_has_no_answer_is_refused(
    rt: Runtime, worker: Worker
) -> None:
    """The wait a failed gather left behind is still the run's (asyncio leaves the other
    branches running): the run cannot complete past it, and says why (first() is for
    giving up on a wait)."""
    run_id = await rt.start(gf_returns_past_its_wait)
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED
    assert info.error is not None and info.error["type"] == "UsageError"
    assert "a gather that raised another branch's failure first" in info.error["message"]


bodies_run: Counter[str] = Counter()


@step
async def agent_turn(label: str) -> Any:
    bodies_run[label] += 1  # (an LLM call, say: what a needless pass would pay again)
    return await step_hook("ask")


async def _tool_that_fails() -> None:
    await asyncio.sleep(0.02)
    raise ValueError("a tool is down")


@step
async def tools_with_one_down() -> str:
    results = await asyncio.gather(_tool_that_fails(), asyncio.sleep(0), return_exceptions=True)
    return f"{sum(isinstance(r, Exception) for r in results)} of 2 tools failed"


@workflow(name="gf_step_handles_its_failure")
async def gf_step_handles_its_failure() -> Any:
    return await asyncio.gather(agent_turn("inside a step"), tools_with_one_down())


@workflow(name="gf_body_saw_the_failure")
async def gf_body_saw_the_failure() -> Any:
    await asyncio.gather(fails_at_once(), return_exceptions=True)
    return await agent_turn("seen by the body")


async def _falls_back_inside() -> str:
    try:
        await asyncio.gather(fails_after_a_while())
    except StepFailed:
        return "fell back"
    return "no failure"


@workflow(name="gf_branch_handles_its_failure")
async def gf_branch_handles_its_failure() -> Any:
    return await asyncio.gather(agent_turn("inside a branch"), _falls_back_inside())


@pytest.mark.parametrize(
    ("wf", "label"),
    [
        (gf_step_handles_its_failure, "inside a step"),
        (gf_body_saw_the_failure, "seen by the body"),
        (gf_branch_handles_its_failure, "inside a branch"),
    ],
    ids=["handled_inside_a_step", "seen_by_the_body", "handled_inside_a_branch"],
)
async def test_a_failure_the_code_handled_runs_no_step_again(
    rt: Runtime, worker: Worker, wf: Any, label: str
) -> None:
    """Only a branch of the body failing after the body suspended takes another pass: a
    task a step started and handled, or a failure the body had taken before it suspended,
    does not, or the suspended step_hook step's body would run twice in one execution."""
    bodies_run.clear()
    run_id = await rt.start(wf)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    assert bodies_run[label] == 1


@workflow(name="gf_wait_for_in_a_branch")
async def gf_wait_for_in_a_branch() -> Any:
    return await asyncio.gather(asyncio.wait_for(hook("ask"), 3600), hook("other"))


@workflow(name="gf_shielded_wait")
async def gf_shielded_wait() -> Any:
    asking = asyncio.ensure_future(hook("ask"))

    async def reads() -> Any:
        return await asyncio.shield(asking)

    return await asyncio.gather(asking, reads(), hook("other"))


@pytest.mark.parametrize(
    ("wf", "result"),
    [(gf_wait_for_in_a_branch, ["ask!", "other!"]), (gf_shielded_wait, ["ask!", "ask!", "other!"])],
    ids=["wait_for", "shield"],
)
async def test_a_branch_blocked_outside_the_run_holds_a_wait_back_only_briefly(
    rt: Runtime, worker: Worker, wf: Any, result: Any
) -> None:
    """A branch blocked on a future outside the run, which the held wait's release may be
    what completes (wait_for's and shield's own waiting): the run suspends once every other
    branch has been blocked so for HOLD_SECONDS (bench: not timed here), and completes with
    the answers."""
    run_id = await rt.start(wf)
    await asyncio.wait_for(worker.drain(), timeout=20)
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    for pending in await rt.list_hooks(run_id=run_id):
        assert await rt.resume_hook(pending.token, pending.name + "!") is True
    await asyncio.wait_for(worker.drain(), timeout=20)
    info = await rt.get_run(run_id)
    assert (info.status, info.result) == (RunStatus.COMPLETED, result)


@step
async def looks_up_first() -> str:
    return "looked up"


async def _looks_up_then_fails() -> None:
    await looks_up_first()
    await fails_at_once()  # after a recorded result: the execution writes before it runs


@workflow(name="gf_write_then_failure_beside_a_wait")
async def gf_write_then_failure_beside_a_wait() -> Any:
    return await asyncio.gather(hook("ask"), _looks_up_then_fails())


async def test_a_wait_holds_back_for_the_executions_write_however_long(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A branch awaiting the execution's own write (here the flush before its second
    step, made slower than HOLD_SECONDS as a Redis round trip is under load) is working,
    not blocked outside the run: the wait holds back for it, and the step's failure fails
    the run at once. Before, the wait let go during the write: the run suspended with the
    failure in its log (seen in a full-suite run, test_a_failure_gathers_deep_...[redis-4])."""
    monkeypatch.setattr(branches, "HOLD_SECONDS", 0.01)
    original = ExecutionStore.apply

    async def slow_apply(self: ExecutionStore, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.2)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(ExecutionStore, "apply", slow_apply)
    run_id = await rt.start(gf_write_then_failure_beside_a_wait)
    await asyncio.wait_for(worker.drain(), timeout=20)
    info = await rt.get_run(run_id)
    events = [e.type for e in await rt.events(run_id)]
    assert info.status is RunStatus.FAILED, (info.status, events)
    assert "workflow.suspended" not in events

"""step_hook + step checkpoints, in-process, against the embedded store and real Redis."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from runtime import (
    STEP_HOOK_TIMEOUT,
    HookTimeout,
    RunStatus,
    Runtime,
    Worker,
    delete_step_checkpoint,
    hook,
    load_step_checkpoint,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)
from tests.helpers import running
from tests.raw_redis import raw

calls: Counter[str] = Counter()
tokens: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()
    tokens.clear()


async def _remember(token: str) -> None:
    tokens.append(token)


@step
async def review_step(draft: str) -> dict[str, Any]:
    checkpoint = await load_step_checkpoint()
    if checkpoint is None:
        calls["setup"] += 1
        state = draft.upper()
        await save_step_checkpoint({"state": state})
    else:
        state = checkpoint["state"]
    calls["before_hook"] += 1
    feedback = await step_hook(
        "human_review", timeout="24h", on_created=_remember, on_timeout="return"
    )
    if feedback is STEP_HOOK_TIMEOUT:
        return {"state": state, "feedback": None}
    return {"state": state, "feedback": feedback}


@workflow(name="review")
async def review(draft: str) -> dict[str, Any]:
    return await review_step(draft)


async def test_seed_review_step_end_to_end(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(review, "draft")
    await worker.drain()

    run = await rt.get_run(run_id)
    assert run.status is RunStatus.SUSPENDED
    assert [h.name for h in run.hooks] == ["human_review"]
    assert tokens == [run.hooks[0].token]
    assert worker.running == 0
    assert await _pending_tasks(rt, run_id) == 0  # the suspension acknowledged its task
    ckpt_key = raw(rt).run_keys(run_id).ckpt
    assert await raw(rt).client.hgetall(ckpt_key) == {b"review_step-0": b'{"state":"DRAFT"}'}

    assert await rt.resume_hook(tokens[0], {"ok": True}) is True
    await worker.drain()

    assert await rt.wait(run_id, timeout=5) == {"state": "DRAFT", "feedback": {"ok": True}}
    assert calls["setup"] == 1  # setup ran once across suspend and resume
    assert calls["before_hook"] == 2  # the step re-executed from the top
    assert tokens == [run.hooks[0].token]  # on_created ran once: no re-prompt
    assert await raw(rt).client.exists(ckpt_key) == 0  # checkpoint gone after completion
    assert await _pending_tasks(rt, run_id) == 0  # and so did the end of the run
    types = [e.type for e in await rt.events(run_id)]
    assert types == [
        "workflow.started",
        "step.started",
        "hook.created",
        "step.suspended",
        "hook.received",
        "step.completed",
        "workflow.completed",
    ]


async def _pending_tasks(rt: Runtime, run_id: str) -> int:
    """Tasks of the run's partition delivered to a worker and not acknowledged."""
    tasks = raw(rt).run_keys(run_id).tasks
    pending: int = (await raw(rt).client.xpending(tasks, "workers"))["pending"]
    return pending


@step
async def two_rounds() -> list[Any]:
    first = await step_hook("ask", on_created=_remember)
    calls["between"] += 1
    second = await step_hook("ask", on_created=_remember)
    return [first, second]


@workflow(name="two_rounds_wf")
async def two_rounds_wf() -> list[Any]:
    return await two_rounds()


async def test_two_sequential_rounds_in_one_step(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(two_rounds_wf)
    await worker.drain()
    assert len(tokens) == 1
    await rt.resume_hook(tokens[0], "a")
    await worker.drain()
    assert len(tokens) == 2 and tokens[0] != tokens[1]
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await rt.resume_hook(tokens[1], "b")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["a", "b"]
    events = await rt.events(run_id)
    suspensions = [e.data["wait"] for e in events if e.type == "step.suspended"]
    assert suspensions == ["two_rounds-0.ask.0", "two_rounds-0.ask.1"]  # one per round
    assert sum(e.type == "hook.created" for e in events) == 2


@step
async def approve_a() -> Any:
    return await step_hook("approve", on_created=_remember)


@step
async def approve_b() -> Any:
    return await step_hook("approve", on_created=_remember)


@workflow(name="two_approvals")
async def two_approvals() -> list[Any]:
    return [await approve_a(), await approve_b()]


async def test_two_steps_same_hook_name_get_distinct_ids(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(two_approvals)
    await worker.drain()
    await rt.resume_hook(tokens[0], "first")
    await worker.drain()
    await rt.resume_hook(tokens[1], "second")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["first", "second"]
    assert tokens[0].endswith(":approve_a-0.approve.0")
    assert tokens[1].endswith(":approve_b-0.approve.0")


@step
async def answered_from_on_created() -> Any:
    calls["step_runs"] += 1
    rt: Runtime = CURRENT["rt"]

    async def answer_now(token: str) -> None:
        tokens.append(token)
        await rt.resume_hook(token, "fast")

    return await step_hook("quick", on_created=answer_now)


CURRENT: dict[str, Any] = {}


@workflow(name="fast_answer")
async def fast_answer() -> Any:
    return await answered_from_on_created()


async def test_answer_from_inside_on_created_is_not_lost(rt: Runtime, worker: Worker) -> None:
    CURRENT["rt"] = rt
    run_id = await rt.start(fast_answer)
    await worker.drain()  # one drain: the run must not strand in `suspended`
    assert (await rt.get_run(run_id)).status is RunStatus.COMPLETED
    assert await rt.wait(run_id, timeout=5) == "fast"
    assert calls["step_runs"] == 2
    assert len(tokens) == 1
    types = [e.type for e in await rt.events(run_id)]
    assert "step.suspended" not in types  # the suspension was refused, not recorded


@step
async def checkpoint_lifecycle() -> Any:
    ckpt = await load_step_checkpoint()
    if ckpt is None:
        await save_step_checkpoint({"n": 1})
        await save_step_checkpoint({"n": 2})  # the latest save wins
    answer = await step_hook("go", on_created=_remember)
    restored = await load_step_checkpoint()
    await delete_step_checkpoint()
    return {"restored": restored, "after_delete": await load_step_checkpoint(), "answer": answer}


@workflow(name="ckpt_wf")
async def ckpt_wf() -> Any:
    return await checkpoint_lifecycle()


async def test_checkpoint_save_load_delete(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(ckpt_wf)
    await worker.drain()
    await rt.resume_hook(tokens[0], 7)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == {
        "restored": {"n": 2},
        "after_delete": None,
        "answer": 7,
    }


@step
async def raising_on_timeout() -> str:
    try:
        await step_hook("slow", timeout=0.05, on_created=_remember, on_timeout="raise")
    except HookTimeout as exc:
        return f"timed out: {exc.hook_id}"
    return "answered"


@workflow(name="raise_wf")
async def raise_wf() -> str:
    return await raising_on_timeout()


@step
async def returning_on_timeout() -> Any:
    answer = await step_hook("slow", timeout="50ms", on_created=_remember, on_timeout="return")
    return "fallback" if answer is STEP_HOOK_TIMEOUT else answer


@workflow(name="return_wf")
async def return_wf() -> Any:
    return await returning_on_timeout()


async def test_on_timeout_raise_raises_hook_timeout_in_step(rt: Runtime) -> None:
    worker = Worker(rt, timer_tick=0.01)
    run_id = await rt.start(raise_wf)
    async with running(worker):
        assert await rt.wait(run_id, timeout=5) == "timed out: raising_on_timeout-0.slow.0"
    assert [e.type for e in await rt.events(run_id)].count("hook.expired") == 1


async def test_on_timeout_return_gives_sentinel(rt: Runtime) -> None:
    worker = Worker(rt, timer_tick=0.01)
    run_id = await rt.start(return_wf)
    async with running(worker):
        assert await rt.wait(run_id, timeout=5) == "fallback"
    hooks = await rt.list_hooks(status="expired", run_id=run_id)
    assert [h.name for h in hooks] == ["slow"]
    assert await rt.list_hooks() == []


# User code (or an agent framework's tool-error middleware) that catches every Exception
# around a wait: the suspension must get through, or the step/workflow would go on with
# its fallback instead of waiting for the answer.
@step
async def swallowing_step(with_on_created: bool) -> Any:
    try:
        return await step_hook("wrapped", on_created=_remember if with_on_created else None)
    except Exception as exc:
        calls["swallowed"] += 1
        return f"swallowed {type(exc).__name__}"


@workflow(name="swallowing_step_wf")
async def swallowing_step_wf(with_on_created: bool) -> Any:
    return await swallowing_step(with_on_created)


@workflow(name="swallowing_hook_wf")
async def swallowing_hook_wf(with_on_created: bool) -> Any:
    try:
        return await hook("wrapped", on_created=_remember if with_on_created else None)
    except Exception as exc:
        calls["swallowed"] += 1
        return f"swallowed {type(exc).__name__}"


@pytest.mark.parametrize("with_on_created", [False, True])
@pytest.mark.parametrize("wf", [swallowing_step_wf, swallowing_hook_wf], ids=["step", "workflow"])
async def test_except_exception_around_a_wait_cannot_swallow_the_suspension(
    rt: Runtime, worker: Worker, wf: Any, with_on_created: bool
) -> None:
    run_id = await rt.start(wf, with_on_created)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    assert calls["swallowed"] == 0
    [pending] = await rt.list_hooks(run_id=run_id)
    assert tokens == ([pending.token] if with_on_created else [])
    assert await rt.resume_hook(pending.token, {"ok": 1}) is True
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == {"ok": 1}
    assert calls["swallowed"] == 0
    types = [e.type for e in await rt.events(run_id)]
    assert types.count("hook.created") == 1 and types.count("hook.received") == 1

"""Steps, retries, durable sleep, cancellation and limits."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from runtime import (
    Limits,
    PayloadTooLarge,
    RunCancelled,
    RunFailed,
    RunStatus,
    Runtime,
    StepFailed,
    UsageError,
    WaitTimeout,
    Worker,
    WorkflowNotFound,
    hook,
    load_step_checkpoint,
    save_step_checkpoint,
    sleep,
    step,
    step_hook,
    workflow,
)
from tests.helpers import running
from tests.raw_redis import raw

calls: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()


@step
async def side_effect(name: str) -> str:
    calls[name] += 1
    return f"did {name}"


@workflow(name="replay_wf")
async def replay_wf() -> list[str]:
    first = await side_effect("one")
    await hook("wait")
    second = await side_effect("two")
    return [first, second]


async def test_recorded_step_results_are_not_rerun_on_replay(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start("replay_wf")  # by registered name
    await worker.drain()
    [pending] = await rt.list_hooks()
    await rt.resume_hook(pending.token, None)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["did one", "did two"]
    assert calls == Counter({"one": 1, "two": 1})


# The backoff outlasts a drain on a loaded machine (10 ms did not: the drain fired the
# timer and the run had completed before the test looked for its suspension).
@step(retries=2, retry_delay="300ms", backoff=1.0)
async def flaky() -> str:
    calls["flaky"] += 1
    if calls["flaky"] < 3:
        raise ConnectionError(f"attempt {calls['flaky']} failed")
    return "finally"


@workflow(name="retry_wf")
async def retry_wf() -> str:
    return await flaky()


async def test_retries_back_off_through_the_deadline_set(rt: Runtime) -> None:
    worker = Worker(rt, timer_tick=0.01)
    run_id = await rt.start(retry_wf)
    await worker.drain()
    # after the first failure the run waits on a durable timer, holding no worker
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    async with running(worker):
        assert await rt.wait(run_id, timeout=5) == "finally"
    events = await rt.events(run_id)
    failed = [e.data for e in events if e.type == "step.failed"]
    assert [f["attempt"] for f in failed] == [0, 1]
    error = failed[0]["error"]
    assert error.pop("traceback").endswith("ConnectionError: attempt 1 failed")
    assert error == {"type": "ConnectionError", "message": "attempt 1 failed"}
    assert sum(e.type == "timer.fired" for e in events) == 2


@step(retries=1, retry_delay=0)
async def always_fails() -> None:
    calls["always"] += 1
    raise ValueError("nope")


@workflow(name="fail_wf")
async def fail_wf() -> str:
    try:
        await always_fails()
    except StepFailed as exc:
        return f"caught {exc.error_type} from {exc.step_id}"
    return "unreachable"


@workflow(name="uncaught_wf")
async def uncaught_wf() -> None:
    await always_fails()


async def test_step_failure_after_retries(rt: Runtime, worker: Worker) -> None:
    caught = await rt.start(fail_wf)
    uncaught = await rt.start(uncaught_wf)
    await worker.drain()
    assert await rt.wait(caught, timeout=5) == "caught ValueError from always_fails-0"
    with pytest.raises(RunFailed, match="always_fails-0"):
        await rt.wait(uncaught, timeout=5)
    run = await rt.get_run(uncaught)
    assert run.status is RunStatus.FAILED
    assert run.error is not None and run.error["type"] == "StepFailed"
    assert calls["always"] == 4  # 2 attempts x 2 runs


class NotJson:
    pass


@step(retries=2, retry_delay=0)
async def charges_then_bad_checkpoint() -> str:
    calls["charged"] += 1  # a side effect (an agent's tool that charged a card)
    await save_step_checkpoint({"reading": NotJson()})  # InvalidPayload, every attempt
    return "never"


@workflow(name="bad_checkpoint_wf")
async def bad_checkpoint_wf() -> str:
    return await charges_then_bad_checkpoint()


async def test_an_invalid_payload_in_a_step_is_not_retried(rt: Runtime, worker: Worker) -> None:
    """A checkpoint that is not JSON fails the same way at every attempt: the step fails
    at once, its body (and its side effects) run once, not once per retry."""
    run_id = await rt.start(bad_checkpoint_wf)
    await worker.drain()
    with pytest.raises(RunFailed, match="InvalidPayload"):
        await rt.wait(run_id, timeout=5)
    assert calls["charged"] == 1


@step(timeout=0.05)
async def too_slow() -> None:
    await asyncio.sleep(5)


@workflow(name="timeout_wf")
async def timeout_wf() -> str:
    try:
        await too_slow()
    except StepFailed as exc:
        return exc.error_type or ""
    return "no"


async def test_step_timeout(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(timeout_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "TimeoutError"


@workflow(name="sleepy")
async def sleepy() -> str:
    await side_effect("before")
    await sleep("300ms")  # (longer than a drain takes on a loaded machine: still suspended)
    await side_effect("after")
    return "woke"


async def test_durable_sleep(rt: Runtime) -> None:
    worker = Worker(rt, timer_tick=0.01)
    run_id = await rt.start(sleepy)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    async with running(worker):
        assert await rt.wait(run_id, timeout=5) == "woke"
    assert calls == Counter({"before": 1, "after": 1})
    fired = [e for e in await rt.events(run_id) if e.type == "timer.fired"]
    scheduled = [e for e in await rt.events(run_id) if e.type == "timer.scheduled"]
    assert fired[0].timestamp_ms >= scheduled[0].data["due"]  # never early


@workflow(name="long_sleep")
async def long_sleep() -> None:
    await sleep("1h")


async def test_cancel_suspended_run_cleans_deadlines(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(long_sleep)
    await worker.drain()
    assert await raw(rt).client.zcard(_deadlines(rt, run_id)) == 1
    await rt.cancel(run_id, reason="operator")
    assert await raw(rt).client.zcard(_deadlines(rt, run_id)) == 0
    with pytest.raises(RunCancelled):
        await rt.wait(run_id, timeout=1)
    assert (await rt.events(run_id))[-1].data == {"reason": "operator"}


gate: dict[str, asyncio.Event] = {}


@step
async def blocks_until_released() -> str:
    gate["entered"].set()
    await gate["release"].wait()
    return "done"


@workflow(name="cancel_running")
async def cancel_running() -> str:
    return await blocks_until_released()


async def test_cancel_running_run_stops_its_writes(rt: Runtime) -> None:
    gate["entered"], gate["release"] = asyncio.Event(), asyncio.Event()
    worker = Worker(rt)
    run_id = await rt.start(cancel_running)
    async with running(worker):
        await asyncio.wait_for(gate["entered"].wait(), 5)
        await rt.cancel(run_id)
        gate["release"].set()
        with pytest.raises(RunCancelled):
            await rt.wait(run_id, timeout=5)
        # the worker's completion write is refused (fenced): nothing after the cancel
        for _ in range(100):
            if worker.running == 0:
                break
            await asyncio.sleep(0.01)
        assert worker.running == 0
    types = [e.type for e in await rt.events(run_id)]
    assert types[-1] == "workflow.cancelled"
    assert "step.completed" not in types
    assert await raw(rt).client.xpending(_tasks(rt, run_id), "workers") == {
        "pending": 0,
        "min": None,
        "max": None,
        "consumers": [],
    }


def _deadlines(rt: Runtime, run_id: str) -> str:
    return raw(rt).run_keys(run_id).deadlines


def _tasks(rt: Runtime, run_id: str) -> str:
    return raw(rt).run_keys(run_id).tasks


@workflow(name="chatty")
async def chatty(n: int) -> int:
    for i in range(n):
        await side_effect(f"s{i}")
    return n


async def test_event_limit_fails_the_run_clearly(backend_url: str) -> None:
    async with Runtime(backend_url, partitions=2, limits=Limits(max_events=12)) as rt:
        worker = Worker(rt)
        run_id = await rt.start(chatty, 50)
        await worker.drain()
        with pytest.raises(RunFailed, match="EventLimitExceeded"):
            await rt.wait(run_id, timeout=5)
        assert len(await rt.events(run_id)) <= 12 + 1


@workflow(name="hook_loop")
async def hook_loop(n: int) -> int:
    for _ in range(n):
        await hook("q")
    return n


async def test_a_run_never_suspends_where_no_answer_fits(backend_url: str) -> None:
    """A hook loop whose log would be exactly full at a suspension (3 events per round, a
    limit of 12): the run fails clearly instead of suspending on a hook whose answer the
    store must refuse. Before, it suspended with 12 events and every answer raised
    EventLimitExceeded: without a timeout, stuck for good."""
    async with Runtime(backend_url, partitions=2, limits=Limits(max_events=12)) as rt:
        worker = Worker(rt)
        run_id = await rt.start(hook_loop, 50)
        await worker.drain()
        for _ in range(10):
            pending = await rt.list_hooks(run_id=run_id)
            if not pending:
                break
            await rt.resume_hook(pending[0].token, "ok")  # every answer is taken
            await worker.drain()
        with pytest.raises(RunFailed, match="EventLimitExceeded"):
            await rt.wait(run_id, timeout=5)
        assert len(await rt.events(run_id)) <= 12 + 1


@step
async def big_checkpoint() -> None:
    await save_step_checkpoint("x" * 2000)


@workflow(name="big_ckpt_wf")
async def big_ckpt_wf() -> str:
    try:
        await big_checkpoint()
    except StepFailed as exc:
        return exc.error_type or ""
    return "saved"


async def test_checkpoint_limit(backend_url: str) -> None:
    async with Runtime(backend_url, partitions=2, limits=Limits(max_checkpoint_bytes=1000)) as rt:
        run_id = await rt.start(big_ckpt_wf)
        await Worker(rt).drain()
        assert await rt.wait(run_id, timeout=5) == "PayloadTooLarge"
        assert PayloadTooLarge.code == "payload_too_large"


async def test_usage_errors(rt: Runtime) -> None:
    with pytest.raises(WorkflowNotFound, match="no workflow registered as 'missing'"):
        await rt.start("missing")
    with pytest.raises(UsageError, match="while a workflow runs"):
        await step_hook("x")
    with pytest.raises(UsageError, match=r"load_step_checkpoint\(\) can only be used while"):
        await load_step_checkpoint()
    with pytest.raises(UsageError, match="session id"):
        await rt.start(chatty, 1, session="short")
    with pytest.raises(WaitTimeout):
        run_id = await rt.start(long_sleep)
        await rt.wait(run_id, timeout=0.05)


@step
async def nested_inner() -> None:
    return None


@step
async def nested_outer() -> None:
    await nested_inner()


@workflow(name="nested_wf")
async def nested_wf() -> str:
    try:
        await nested_outer()
    except StepFailed as exc:
        return exc.error_type or ""
    return "ok"


async def test_step_inside_step_is_a_usage_error(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(nested_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "UsageError"


async def test_steps_run_plainly_outside_a_workflow() -> None:
    assert await side_effect("plain") == "did plain"
    assert calls["plain"] == 1


@workflow(name="returns_object")
async def returns_object() -> Any:
    return object()


async def test_unserializable_result_fails_clearly(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(returns_object)
    await worker.drain()
    with pytest.raises(RunFailed, match="JSON-serializable"):
        await rt.wait(run_id, timeout=5)


def test_two_workflows_cannot_share_a_name_across_modules() -> None:
    from runtime import UsageError as Refused

    async def twin() -> None:
        return None

    twin.__module__ = "somewhere.else"
    twin.__qualname__ = "replay_wf"
    with pytest.raises(Refused, match="already registered"):
        workflow(name="replay_wf")(twin)

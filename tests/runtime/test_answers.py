"""The resume path: every way an answer can be right or wrong, and that a rejected answer
changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import (
    HookAlreadyAnswered,
    HookCancelled,
    HookExpired,
    HookNotFound,
    InvalidPayload,
    InvalidToken,
    Limits,
    PayloadTooLarge,
    RunFinished,
    RunNotFound,
    RunStatus,
    Runtime,
    Worker,
    hook,
    step,
    step_hook,
    workflow,
)
from tests.helpers import running

CHOICE_SCHEMA = {
    "type": "object",
    "properties": {"choice": {"enum": ["yes", "no"]}},
    "required": ["choice"],
    "description": "Ship it?",
}


@step
async def ask_with_schema() -> Any:
    return await step_hook("decide", schema=CHOICE_SCHEMA)


@workflow(name="schema_wf")
async def schema_wf() -> Any:
    return await ask_with_schema()


@workflow(name="wf_level_hook")
async def wf_level_hook() -> Any:
    first = await hook("approve")
    second = await hook("approve", timeout="20ms", on_timeout="return")
    return [first, repr(second)]


async def _suspended_run(rt: Runtime, worker: Worker, wf: Any) -> tuple[str, str]:
    run_id = await rt.start(wf)
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    return run_id, pending.token


async def _snapshot(rt: Runtime, run_id: str) -> list[tuple[str, str]]:
    return [(e.id, e.type) for e in await rt.events(run_id)]


async def test_rejected_answers_change_nothing(rt: Runtime, worker: Worker) -> None:
    run_id, token = await _suspended_run(rt, worker, schema_wf)
    before = await _snapshot(rt, run_id)

    with pytest.raises(InvalidToken):
        await rt.resume_hook("not-a-token", {"choice": "yes"})
    with pytest.raises(InvalidToken):
        await rt.resume_hook(f"{run_id}:bad/hook", {"choice": "yes"})
    with pytest.raises(HookNotFound) as not_found:
        await rt.resume_hook(f"{run_id}:nope.0", {"choice": "yes"})
    assert not_found.value.run_id == run_id and not_found.value.hook_id == "nope.0"
    with pytest.raises(RunNotFound):
        await rt.resume_hook("r-" + "0" * 24 + ":x.0", {"choice": "yes"})
    with pytest.raises(InvalidPayload, match="schema"):
        await rt.resume_hook(token, {"choice": "maybe"})
    with pytest.raises(InvalidPayload, match="JSON"):
        await rt.resume_hook(token, {"choice": object()})
    with pytest.raises(PayloadTooLarge):
        await rt.resume_hook(token, {"choice": "x" * (rt.limits.max_payload_bytes + 1)})

    assert await _snapshot(rt, run_id) == before
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    assert [h.token for h in await rt.list_hooks()] == [token]


async def test_duplicate_and_conflicting_answers(rt: Runtime, worker: Worker) -> None:
    run_id, token = await _suspended_run(rt, worker, schema_wf)
    assert await rt.resume_hook(token, {"choice": "yes"}) is True
    after_first = await _snapshot(rt, run_id)
    assert await rt.resume_hook(token, {"choice": "yes"}) is False  # idempotent
    with pytest.raises(HookAlreadyAnswered):
        await rt.resume_hook(token, {"choice": "no"})
    assert await _snapshot(rt, run_id) == after_first
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == {"choice": "yes"}
    # after completion the same answer is still an idempotent success
    assert await rt.resume_hook(token, {"choice": "yes"}) is False


async def test_answer_after_cancel_is_rejected(rt: Runtime, worker: Worker) -> None:
    run_id, token = await _suspended_run(rt, worker, schema_wf)
    await rt.cancel(run_id)
    before = await _snapshot(rt, run_id)
    with pytest.raises(HookCancelled):
        await rt.resume_hook(token, {"choice": "yes"})
    assert isinstance(HookCancelled("x"), HookExpired)
    assert await _snapshot(rt, run_id) == before
    run = await rt.get_run(run_id)
    assert run.status is RunStatus.CANCELLED
    assert await rt.list_hooks() == []
    with pytest.raises(RunFinished):
        await rt.cancel(run_id)


async def test_workflow_level_hook_and_answer_after_expiry(rt: Runtime) -> None:
    worker = Worker(rt, timer_tick=0.01)
    run_id = await rt.start(wf_level_hook)
    await worker.drain()
    [first] = await rt.list_hooks(run_id=run_id)
    assert first.hook_id == "h0.approve" and first.step_id is None
    await rt.resume_hook(first.token, "yes")
    async with running(worker):
        assert await rt.wait(run_id, timeout=5) == ["yes", "STEP_HOOK_TIMEOUT"]
    second = (await rt.list_hooks(run_id=run_id, status="expired"))[0]
    before = await _snapshot(rt, run_id)
    with pytest.raises(HookExpired) as late:
        await rt.resume_hook(second.token, "late")
    assert type(late.value) is HookExpired  # not its subclass HookCancelled
    assert await _snapshot(rt, run_id) == before


async def test_payload_limit_is_configurable(backend_url: str) -> None:
    async with Runtime(backend_url, partitions=2, limits=Limits(max_payload_bytes=100)) as rt:
        worker = Worker(rt)
        run_id, token = await _suspended_run(rt, worker, schema_wf)
        with pytest.raises(PayloadTooLarge, match="limit is 100"):
            await rt.resume_hook(token, {"choice": "yes", "pad": "x" * 100})
        assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED


@workflow(name="schema_of_caller_wf")
async def schema_of_caller_wf(schema: dict[str, Any]) -> Any:
    return await hook("decide", schema=schema)


async def test_a_schema_whose_ref_points_nowhere_is_refused_when_the_hook_is_made(
    rt: Runtime, worker: Worker
) -> None:
    """A $ref that resolves nowhere in the schema (a typo, a URL: nothing is fetched) fails
    the run clearly when the hook is made. Before, the hook was made and every answer to
    it raised jsonschema's internal referencing error: it could only expire."""
    for ref in ("#/$defs/missing", "https://example.com/choice.json"):
        schema = {"type": "object", "properties": {"choice": {"$ref": ref}}}
        run_id = await rt.start(schema_of_caller_wf, schema)
        await worker.drain()
        info = await rt.get_run(run_id)
        assert info.status is RunStatus.FAILED and info.error is not None
        assert info.error["type"] == "UsageError" and ref in info.error["message"]
        assert await rt.list_hooks(run_id=run_id) == []
    # a $ref inside the schema is fine
    schema = {
        "type": "object",
        "properties": {"choice": {"$ref": "#/$defs/choice"}},
        "$defs": {"choice": {"enum": ["yes", "no"]}},
    }
    run_id = await rt.start(schema_of_caller_wf, schema)
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    with pytest.raises(InvalidPayload, match="choice"):
        await rt.resume_hook(pending.token, {"choice": "maybe"})
    assert await rt.resume_hook(pending.token, {"choice": "yes"})


async def test_an_answer_is_validated_as_it_is_stored(rt: Runtime, worker: Worker) -> None:
    """From Python, a tuple is stored as an array and an int key as a string: the schema
    judges that, not the Python object. Before, a tuple was refused as no array and
    {1: "x"} passed a schema that the stored {"1": "x"} breaks."""
    run_id = await rt.start(schema_of_caller_wf, {"type": "array"})
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    assert await rt.resume_hook(pending.token, ("a", "b"))
    schema = {"type": "object", "properties": {"1": {"type": "integer"}}}
    run_id = await rt.start(schema_of_caller_wf, schema)
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    before = await _snapshot(rt, run_id)
    with pytest.raises(InvalidPayload):
        await rt.resume_hook(pending.token, {1: "x"})
    assert await _snapshot(rt, run_id) == before

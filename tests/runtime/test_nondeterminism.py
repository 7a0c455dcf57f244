"""Replay checks: a workflow whose code changed under a waiting run is blocked, not
replayed wrongly and not re-asked; patched() branches; now/random/uuid4 replay; the dry
replayer. In-process workers on memory:// and real Redis (the code a worker runs is
switched with tests.apps.versions_app.VARIANT)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime import (
    NondeterminismError,
    RunStatus,
    Runtime,
    UsageError,
    Worker,
    hook,
    now,
    random,
    uuid4,
    workflow,
)
from runtime.engine.replayer import replay
from runtime.metrics import Metrics
from runtime.registry import get_workflow
from tests.apps import versions_app
from tests.apps.versions_app import VARIANT


@pytest.fixture(autouse=True)
def _variant() -> Iterator[None]:
    VARIANT["name"] = "a"
    yield
    VARIANT["name"] = "a"


async def answer(rt: Runtime, worker: Worker, run_id: str, name: str, payload: object) -> None:
    [pending] = [h for h in await rt.list_hooks(run_id=run_id) if h.status.value == "pending"]
    assert pending.name == name
    await rt.resume_hook(pending.token, payload)
    await worker.drain()


CHANGES = ["swap", "rename", "insert", "remove", "rename_step_hook"]


@pytest.mark.parametrize("change", CHANGES)
async def test_a_changed_workflow_is_blocked_then_retried_with_the_right_code(
    rt: Runtime, worker: Worker, change: str
) -> None:
    run_id = await rt.start("deploy_wf")
    await worker.drain()  # waits on the workflow's hook "approve"
    waiting_on = "approve"
    if change == "rename_step_hook":
        await answer(rt, worker, run_id, "approve", "yes")  # now waits inside ask_step
        waiting_on = "confirm"
    created_before = [e for e in await rt.events(run_id) if e.type == "hook.created"]
    VARIANT["name"] = change  # deployed while the run waits
    await answer(rt, worker, run_id, waiting_on, "yes" if waiting_on == "approve" else "sure")
    # the run is blocked, visibly, with what differs; nothing was asked again
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.BLOCKED, info
    assert info.error is not None and info.error["code"] == "nondeterminism"
    assert (
        info.error["recorded"] and info.error["now"] and info.error["recorded"] != info.error["now"]
    )
    assert [r.run_id for r in await rt.list_runs(RunStatus.BLOCKED)] == [run_id]
    assert (await rt.stats())["blocked"] == 1
    metrics = (await Metrics().render(rt)).decode()
    assert "parley_runs_blocked 1.0" in metrics
    events = await rt.events(run_id)
    assert [e for e in events if e.type == "hook.created"] == created_before
    assert events[-1].type == "workflow.blocked"
    # the right code is back: retry resumes where the run stopped
    VARIANT["name"] = "a"
    await rt.retry(run_id)
    await worker.drain()
    if waiting_on == "approve":
        await answer(rt, worker, run_id, "confirm", "sure")
    result = await rt.wait(run_id, timeout=5)
    assert result == {"a": 10, "b": 20, "confirmed": "sure", "answer": "yes", "finished_by": "a"}
    assert (await rt.stats())["blocked"] == 0
    with pytest.raises(UsageError, match="only a blocked run"):
        await rt.retry(run_id)


async def test_calls_after_the_recorded_history_are_new_work(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start("deploy_wf")
    await worker.drain()
    VARIANT["name"] = "a2"  # the same calls as far as the log goes
    await answer(rt, worker, run_id, "approve", "yes")
    await answer(rt, worker, run_id, "confirm", "ok")
    assert (await rt.wait(run_id, timeout=5))["finished_by"] == "a2"


async def test_patched_keeps_waiting_runs_on_the_old_path(rt: Runtime, worker: Worker) -> None:
    old_run = await rt.start("patched_wf")
    await worker.drain()  # waits inside old_ask
    VARIANT["name"] = "b"  # the patch is deployed
    new_run = await rt.start("patched_wf")
    await worker.drain()
    await answer(rt, worker, old_run, "decide", "x")
    await answer(rt, worker, new_run, "decide", "y")
    assert await rt.wait(old_run, timeout=5) == ["old", "old:x"]
    assert await rt.wait(new_run, timeout=5) == ["new", "new:y"]
    marked = [e.data for e in await rt.events(new_run) if e.type == "patch.marked"]
    assert marked == [{"patch": "v2"}]  # recorded once, answered the same on every replay


async def test_patched_inside_a_step_follows_the_code_that_began_the_step(
    rt: Runtime, worker: Worker
) -> None:
    old_run = await rt.start("patched_step_wf")
    await worker.drain()  # waits inside pick, begun on the code without the patch
    VARIANT["name"] = "b"  # the patched step is deployed
    new_run = await rt.start("patched_step_wf")
    await worker.drain()  # waits inside pick too: it asks before it reaches patched()
    await answer(rt, worker, old_run, "choice", "x")
    await answer(rt, worker, new_run, "choice", "y")
    assert await rt.wait(old_run, timeout=5) == "v1:x"
    assert await rt.wait(new_run, timeout=5) == "v2:y"


@workflow(name="values_wf")
async def values_wf() -> list[object]:
    values = [now().isoformat(), random(), str(uuid4())]
    await hook("go")
    return values


async def test_now_random_and_uuid4_are_recorded_and_replayed(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(values_wf)
    await worker.drain()
    recorded = [e.data for e in await rt.events(run_id) if e.type == "value.recorded"]
    assert [d["kind"] for d in recorded] == ["now", "random", "uuid4"]
    await answer(rt, worker, run_id, "go", 1)  # replayed from the top
    when, number, uid = await rt.wait(run_id, timeout=5)
    assert number == recorded[1]["value"] and uid == recorded[2]["value"]
    assert when.startswith("20")  # an ISO time from the recorded instant
    assert [e.data for e in await rt.events(run_id) if e.type == "value.recorded"] == recorded


async def test_the_dry_replayer_reports_a_match_and_a_mismatch(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start("deploy_wf")
    await worker.drain()
    events = await rt.events(run_id)
    report = await replay(get_workflow("deploy_wf"), run_id, events)
    assert report.ok and "h0.approve" in report.stopped
    VARIANT["name"] = "swap"
    report = await replay(get_workflow("deploy_wf"), run_id, events)
    assert not report.ok and report.mismatch is not None
    assert report.mismatch["position"] == 0
    assert "prepare" in report.mismatch["recorded"] and "prepare" in report.mismatch["now"]
    assert await rt.events(run_id) == events  # a dry replay writes nothing


def test_the_error_names_the_run_and_what_differs() -> None:
    error = NondeterminismError(
        "mismatch", run_id="r-1", position=2, recorded="hook 'approve'", now="hook 'x'"
    )
    assert error.to_json()["recorded"] == "hook 'approve'" and error.run_id == "r-1"
    assert versions_app.variant() == "a"

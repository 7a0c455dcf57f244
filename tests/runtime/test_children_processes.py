"""A child workflow with real `parley worker` processes, the worker SIGKILLed at each point
between "child started" and "parent resumed": the child is started exactly once and the
parent gets its result."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from runtime import RunStatus, Runtime
from tests.processes import PARTITIONS, ROOT, WorkerProcess

pytestmark = pytest.mark.e2e
APP = "tests.apps.children_app"


@pytest.mark.parametrize(
    "crash_at",
    [
        "after_child_started",  # the parent's worker, right after the child was started
        "after_final_event",  # the child's worker, right after the child ended
        "after_final_event@2",  # after the first child and the parent's second start
    ],
)
async def test_a_child_survives_a_worker_killed_between_start_and_resume(
    prt: Runtime, redis_url: str, workers: list[WorkerProcess], crash_at: str
) -> None:
    doomed = WorkerProcess(redis_url, APP, crash_at=crash_at, concurrency=1)
    workers.append(doomed)
    parent = await prt.start("parent_wf", 5)
    assert doomed.wait_exit(timeout=20) != 0  # it killed itself at the point
    workers.append(WorkerProcess(redis_url, APP))
    assert await prt.wait(parent, timeout=30) == [10, 20]
    info = await prt.get_run(parent)
    assert len(info.child_run_ids) == 2
    assert (await prt.stats())["started"] == 3  # each child started once
    started = [e for e in await prt.events(parent) if e.type == "child.started"]
    assert len(started) == 2
    for kid in info.child_run_ids:
        assert (await prt.get_run(kid)).status is RunStatus.COMPLETED
        ends = [e for e in await prt.events(kid) if e.type == "workflow.completed"]
        assert len(ends) == 1


async def test_parley_runs_show_names_parent_and_children(
    prt: Runtime, redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers.append(WorkerProcess(redis_url, APP))
    parent = await prt.start("parent_wf", 2)
    assert await prt.wait(parent, timeout=30) == [4, 8]
    kids = (await prt.get_run(parent)).child_run_ids

    def show(run_id: str, *extra: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "runtime.cli", "runs", "show", run_id, *extra,
             "--redis", redis_url, "--partitions", str(PARTITIONS)],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert f"children  {' '.join(kids)}" in show(parent)
    assert f"parent    {parent}" in show(kids[0])
    assert json.loads(show(parent, "--json"))["child_run_ids"] == kids

"""Deploys under waiting runs, with real `parley worker` processes on real Redis: a changed
workflow blocks its runs (API, CLI and metric show it; nothing is asked again) until the
right code retries them; versioned workers keep each run on its version; `parley replay`
checks a history against new code."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import RunStatus, Runtime
from runtime.metrics import Metrics
from tests.processes import PARTITIONS, ROOT, WorkerProcess

pytestmark = pytest.mark.e2e
APP = "tests.apps.versions_app"


def parley(redis_url: str, *args: str, variant: str = "a") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args, "--redis", redis_url,
         "--partitions", str(PARTITIONS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PARLEY_TEST_VARIANT": variant},
    )  # fmt: skip


class Fleet:
    """Worker processes of one code variant (and version) at a time."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.running: list[WorkerProcess] = []

    def start(self, variant: str, version: str | None = None) -> WorkerProcess:
        args = ("--version", version) if version else ()
        worker = WorkerProcess(
            self.redis_url, APP, extra_env={"PARLEY_TEST_VARIANT": variant}, extra_args=args
        )
        self.running.append(worker)
        return worker

    def stop(self, worker: WorkerProcess) -> None:
        worker.stop()
        self.running.remove(worker)

    def stop_all(self) -> None:
        for worker in list(self.running):
            self.stop(worker)


@pytest.fixture
def fleet(redis_url: str) -> Iterator[Fleet]:
    started = Fleet(redis_url)
    yield started
    started.stop_all()


async def until_status(rt: Runtime, run_id: str, status: RunStatus, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while (await rt.get_run(run_id)).status is not status:
        assert time.monotonic() < deadline, f"{run_id} is {(await rt.get_run(run_id)).status}"
        await asyncio.sleep(0.02)


async def answer(rt: Runtime, run_id: str, name: str, payload: object) -> None:
    [pending] = [h for h in await rt.list_hooks(run_id=run_id) if h.status.value == "pending"]
    assert pending.name == name
    await rt.resume_hook(pending.token, payload)


@pytest.mark.parametrize("change", ["swap", "rename", "insert", "remove"])
async def test_a_deploy_that_changes_the_workflow_blocks_its_waiting_runs(
    prt: Runtime, redis_url: str, fleet: Fleet, change: str
) -> None:
    old_code = fleet.start("a")
    run_id = await prt.start("deploy_wf")
    await until_status(prt, run_id, RunStatus.SUSPENDED)
    fleet.stop(old_code)
    fleet.start(change)  # the deploy, while the run waits on "approve"
    await answer(prt, run_id, "approve", "yes")
    await until_status(prt, run_id, RunStatus.BLOCKED)
    # visible through the CLI, the API's model and the metric; nothing was asked again
    listed = json.loads(parley(redis_url, "runs", "list", "--status", "blocked", "--json").stdout)
    assert [r["run_id"] for r in listed] == [run_id]
    assert listed[0]["error"]["code"] == "nondeterminism"
    assert "parley_runs_blocked 1.0" in (await Metrics().render(prt)).decode()
    events = await prt.events(run_id)
    assert [e.data["name"] for e in events if e.type == "hook.created"] == ["approve"]
    # the code is put back: retry completes the run with the right result
    fleet.stop_all()
    fleet.start("a")
    retried = parley(redis_url, "runs", "retry", run_id)
    assert retried.returncode == 0, retried.stderr
    await until_status(prt, run_id, RunStatus.SUSPENDED)  # now inside ask_step
    await answer(prt, run_id, "confirm", "sure")
    assert await prt.wait(run_id, timeout=15) == {
        "a": 10, "b": 20, "confirmed": "sure", "answer": "yes", "finished_by": "a",
    }  # fmt: skip


async def test_versioned_workers_keep_each_run_on_its_version(
    prt: Runtime, redis_url: str, fleet: Fleet
) -> None:
    v1 = fleet.start("a", version="v1")
    old = await prt.start("deploy_wf")
    await until_status(prt, old, RunStatus.SUSPENDED)
    fleet.stop(v1)
    fleet.start("a2", version="v2")  # v1 stopped, v2 started
    await answer(prt, old, "approve", "yes")
    await until_status(prt, old, RunStatus.PARKED)  # it waits, visibly
    listed = parley(redis_url, "runs", "list", "--version", "v1", "--json").stdout
    assert [(r["run_id"], r["status"]) for r in json.loads(listed)] == [(old, "parked")]
    assert "parley_runs_parked 1.0" in (await Metrics().render(prt)).decode()
    new = await prt.start("deploy_wf")  # a new run: v2's
    await until_status(prt, new, RunStatus.SUSPENDED)
    await answer(prt, new, "approve", "ok")
    await until_status(prt, new, RunStatus.SUSPENDED)
    await answer(prt, new, "confirm", "ok")
    assert (await prt.wait(new, timeout=15))["finished_by"] == "a2"
    fleet.start("a", version="v1")  # v1 is back: it takes its run where it stopped
    await until_status(prt, old, RunStatus.SUSPENDED)
    await answer(prt, old, "confirm", "sure")
    assert (await prt.wait(old, timeout=15))["finished_by"] == "a"
    assert (await prt.get_run(old)).version == "v1"
    assert (await prt.get_run(new)).version == "v2"


async def test_parley_replay_checks_a_history_against_new_code(
    prt: Runtime, redis_url: str, fleet: Fleet, tmp_path: Path
) -> None:
    fleet.start("a")
    run_id = await prt.start("deploy_wf")
    await until_status(prt, run_id, RunStatus.SUSPENDED)
    exported = parley(redis_url, "runs", "export", run_id)
    assert exported.returncode == 0, exported.stderr
    history = tmp_path / "run.json"
    history.write_text(exported.stdout)
    same = parley(redis_url, "replay", "--app", APP, "--file", str(history), variant="a2")
    assert same.returncode == 0 and "matches" in same.stdout, same.stdout + same.stderr
    changed = parley(redis_url, "replay", "--app", APP, "--file", str(history), variant="swap")
    assert changed.returncode == 1
    assert "MISMATCH at 0" in changed.stdout
    assert "recorded: step 'prepare'" in changed.stdout and "now:" in changed.stdout
    from_store = parley(redis_url, "replay", "--app", APP, run_id, variant="rename")
    assert from_store.returncode == 1 and "hook 'approval'" in from_store.stdout

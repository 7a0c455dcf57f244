"""Versions: a run records the version of the worker that first executes it; a worker
that does not serve a run's version parks it (visibly) instead of replaying it with other
code, and a worker that serves it picks it up. In-process workers, memory:// and Redis."""

from __future__ import annotations

from runtime import RunStatus, Runtime, Worker
from runtime.metrics import Metrics
from tests.apps import versions_app  # noqa: F401  (registers deploy_wf)


async def answer(rt: Runtime, run_id: str, name: str, payload: object) -> None:
    [pending] = [h for h in await rt.list_hooks(run_id=run_id) if h.status.value == "pending"]
    assert pending.name == name
    await rt.resume_hook(pending.token, payload)


async def test_a_worker_parks_runs_of_another_version(rt: Runtime) -> None:
    v1 = Worker(rt, version="v1", timer_tick=0.01)
    v2 = Worker(rt, version="v2", timer_tick=0.01)
    old = await rt.start("deploy_wf")
    await v1.drain()
    assert (await rt.get_run(old)).version == "v1"
    await answer(rt, old, "approve", "yes")
    await v2.drain()  # v1 is gone: v2 does not replay v1's run with its own code
    info = await rt.get_run(old)
    assert info.status is RunStatus.PARKED and info.version == "v1"
    assert [r.run_id for r in await rt.list_runs(RunStatus.PARKED)] == [old]
    assert [r.run_id for r in await rt.list_runs(version="v1")] == [old]
    assert (await rt.stats())["parked"] == 1
    assert "parley_runs_parked 1.0" in (await Metrics().render(rt)).decode()
    # a new run started now is v2's
    new = await rt.start("deploy_wf")
    await v2.drain()
    assert (await rt.get_run(new)).version == "v2"
    assert (await rt.get_run(old)).status is RunStatus.PARKED  # still waiting, untouched
    # v1 is back: it takes its run where it stopped
    await v1.drain()
    assert (await rt.get_run(old)).status is RunStatus.SUSPENDED
    await answer(rt, old, "confirm", "sure")
    await v1.drain()
    assert (await rt.wait(old, timeout=5))["answer"] == "yes"
    assert (await rt.stats())["parked"] == 0
    await answer(rt, new, "approve", "ok")
    await v2.drain()
    await answer(rt, new, "confirm", "ok")
    await v2.drain()
    assert (await rt.get_run(new)).status is RunStatus.COMPLETED


async def test_a_worker_may_serve_older_versions_too(rt: Runtime) -> None:
    run_id = await rt.start("deploy_wf")
    await Worker(rt, version="v1").drain()
    await answer(rt, run_id, "approve", "yes")
    both = Worker(rt, version="v2", serve_versions=["v1", "v2"])
    await both.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED  # executed, not parked
    assert (await rt.get_run(run_id)).version == "v1"


async def test_unversioned_workers_serve_unversioned_runs(rt: Runtime) -> None:
    run_id = await rt.start("deploy_wf")
    await Worker(rt).drain()
    assert (await rt.get_run(run_id)).version is None
    await answer(rt, run_id, "approve", "yes")
    await Worker(rt, version="v2").drain()
    assert (await rt.get_run(run_id)).status is RunStatus.PARKED
    await Worker(rt).drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED

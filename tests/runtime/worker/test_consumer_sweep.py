"""A running worker sweeps the consumers that dead workers left in the task groups
(runtime/worker/leases.py's sweep loop): the consumer of a worker killed with SIGKILL, or of
one that read a task and vanished, is deleted once the reclaim took its tasks over and it
has been idle past the threshold; the sweeping worker's own consumer stays. Bad thresholds
are refused when the worker is made."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable

import pytest

from runtime import RunStatus, Runtime, Worker, cli
from runtime.errors import ParleyError, UsageError
from runtime.settings import Settings
from tests.apps.restart_app import restart_echo
from tests.helpers import running
from tests.processes import WorkerProcess
from tests.raw_redis import raw, task_consumers


async def _until(
    condition_met: Callable[[], Awaitable[bool]], what: str, timeout: float = 10
) -> None:
    deadline = time.monotonic() + timeout
    while not await condition_met():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def _sweeping(rt: Runtime) -> Worker:
    return Worker(
        rt,
        timer_tick=0.01,
        block_seconds=0.05,
        visibility_timeout=0.2,
        consumer_sweep_interval=0.1,
        consumer_sweep_idle="50ms",
    )


async def test_a_worker_sweeps_the_consumer_of_a_worker_that_vanished(
    rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    store = raw(rt)
    run_id = await rt.start(restart_echo, "orphan")
    [task] = [
        t for src in store.task_sources() for t in await store.read_tasks("gone", src, 9, None)
    ]
    assert task.run_id == run_id and "gone" in await task_consumers(store)  # then it vanished
    caplog.set_level(logging.INFO, logger="parley.worker")
    async with running(_sweeping(rt)) as worker:
        assert await rt.wait(run_id, timeout=10) == "orphan"  # reclaimed, then executed

        async def swept() -> bool:
            return "gone" not in await task_consumers(store)

        await _until(swept, "the vanished worker's consumer to be swept")
        assert worker.consumer in await task_consumers(store)  # its own, idle and empty: kept
        swept_total = worker.metrics.registry.get_sample_value("parley_consumers_swept_total")
        assert swept_total is not None and swept_total >= 1
    assert re.search(r"swept \d+ consumer\(s\) of dead workers", caplog.text)


@pytest.mark.e2e
async def test_the_consumer_of_a_worker_killed_with_sigkill_is_swept(
    prt: Runtime, workers: list[WorkerProcess]
) -> None:
    store = raw(prt)
    doomed = WorkerProcess(store.url, "tests.apps.restart_app")
    workers.append(doomed)
    name_prefix = f"{socket.gethostname()}-{doomed.pid}-"
    # a run it executed: its consumer is listed where the task was delivered
    assert await prt.wait(await prt.start(restart_echo, "x"), timeout=15) == "x"
    [dead] = [n for n in await task_consumers(store) if n.startswith(name_prefix)]
    doomed.kill()
    async with running(_sweeping(prt)) as worker:

        async def swept() -> bool:
            return dead not in await task_consumers(store)

        await _until(swept, "the killed worker's consumer to be swept")
        run_id = await prt.start(restart_echo, "after")
        assert await prt.wait(run_id, timeout=10) == "after"
        assert (await prt.get_run(run_id)).status is RunStatus.COMPLETED
        assert worker.consumer in await task_consumers(store)


async def test_a_sweep_leaves_a_live_worker_with_a_task_pending(rt: Runtime) -> None:
    """A consumer holding a task (its run executing, or waiting in its backlog) is not
    swept however long it has been idle."""
    store = raw(rt)
    run_id = await rt.start(restart_echo, "held")
    [task] = [
        t for src in store.task_sources() for t in await store.read_tasks("busy", src, 9, None)
    ]
    await asyncio.sleep(0.12)
    sweeper = Worker(rt, consumer_sweep_idle="50ms", visibility_timeout=3600)
    await rt.connect()
    await sweeper.sweep_consumers()
    assert "busy" in await task_consumers(store)
    [reclaimed] = await store.reclaim("rescuer", 0)
    assert (reclaimed.run_id, reclaimed.message_id) == (run_id, task.message_id)


@pytest.mark.parametrize("value", ["soon", "-1s", "0", "0.1ms", True, [1]])
def test_a_bad_sweep_threshold_is_refused_saying_what_was_expected(
    rt: Runtime, value: object
) -> None:
    with pytest.raises(UsageError) as refused:
        Worker(rt, consumer_sweep_idle=value)  # type: ignore[arg-type]
    assert isinstance(refused.value, ParleyError)
    message = str(refused.value)
    assert "consumer_sweep_idle (PARLEY_CONSUMER_SWEEP_IDLE)" in message
    assert "must" in message and ("'1d'" in message or "'5m'" in message or "'30s'" in message)


def test_the_threshold_is_read_from_the_environment() -> None:
    assert Settings.from_env({}).consumer_sweep_idle == "1d"
    assert Settings.from_env({"PARLEY_CONSUMER_SWEEP_IDLE": "12h"}).consumer_sweep_idle == "12h"


def test_parley_worker_refuses_a_bad_threshold_before_it_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PARLEY_CONSUMER_SWEEP_IDLE", "soon")
    argv = ["worker", "--app", "tests.apps.restart_app", "--redis", "redis://127.0.0.1:1/0"]
    assert cli.main(argv) == 2
    said = capsys.readouterr().err
    assert "PARLEY_CONSUMER_SWEEP_IDLE" in said and "got 'soon'" in said

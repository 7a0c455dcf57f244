"""A run whose log a newer Parley recorded (a rolling upgrade: workers of two versions on
one store) is not replayed by a worker that does not know its form: the worker leaves it,
says why, and a worker that knows it runs it."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from runtime import LogFormatUnknown, RunStatus, Runtime, Worker, hook, workflow
from runtime.engine.execution import Execution
from runtime.models import LOG_FORMAT, Event
from runtime.registry import get_workflow
from runtime.settings import Limits
from runtime.store import Claim, ClaimStatus
from tests.raw_redis import rewrite_log


@workflow(name="log_format_wf")
async def log_format_wf() -> Any:
    return await hook("q")


def _started_in(log_format: int) -> Any:
    def change(event_type: str, data: dict[str, Any]) -> dict[str, Any]:
        if event_type == "workflow.started":
            data["scoped"] = log_format
        return data

    return change


async def test_a_run_of_a_newer_log_format_is_left_for_a_worker_that_knows_it(
    backend_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with Runtime(backend_url, partitions=2, lease_seconds=0.05) as rt:
        run_id = await rt.start(log_format_wf)
        await rewrite_log(rt, run_id, _started_in(LOG_FORMAT + 1))
        older = Worker(rt)
        with caplog.at_level(logging.ERROR, logger="parley.worker"):
            await older.drain()
        assert [e.type for e in await rt.events(run_id)] == ["workflow.started"]  # nothing run
        assert f"recorded in format {LOG_FORMAT + 1} " in caplog.text and run_id in caplog.text
        assert older.metrics.log_format_unknown._value.get() == 1
        # A worker that knows the format (here: the log as this version records it) takes
        # the task over once the lease lapses, and runs the run.
        await rewrite_log(rt, run_id, _started_in(LOG_FORMAT))
        newer = Worker(rt, visibility_timeout=0)
        deadline = time.monotonic() + 5
        while (await rt.get_run(run_id)).status is not RunStatus.SUSPENDED:
            assert time.monotonic() < deadline, "no worker took the run over"
            await newer.reclaim()
            await newer.drain()
            await asyncio.sleep(0.01)


def test_the_error_says_which_run_and_which_formats() -> None:
    claim = Claim(
        ClaimStatus.OK,
        fence="1",
        workflow="log_format_wf",
        events=[Event("1-0", "workflow.started", {"args": [], "scoped": LOG_FORMAT + 5})],
    )
    with pytest.raises(LogFormatUnknown) as raised:
        Execution(
            None,  # type: ignore[arg-type]  (not reached: the index refuses first)
            "r-1",
            get_workflow("log_format_wf"),
            claim,
            limits=Limits(),
            retention_seconds=60,
        )
    error = raised.value
    assert (error.run_id, error.log_format, error.newest) == ("r-1", LOG_FORMAT + 5, LOG_FORMAT)
    assert error.code == "log_format_unknown"


async def test_a_refused_run_is_not_bound_to_the_refusing_workers_version(
    backend_url: str,
) -> None:
    """A rolling upgrade with versioned workers: the older Parley's serve v1, the newer's
    v2. A worker of v1 claims first a run the newer Parley started, and refuses it: the run
    is not recorded as of v1, so a v2 worker runs it. (A review found it parked for v1 for
    good: the refusing claim had recorded its version.)"""
    async with Runtime(backend_url, partitions=2, lease_seconds=0.05) as rt:
        run_id = await rt.start(log_format_wf)
        await rewrite_log(rt, run_id, _started_in(LOG_FORMAT + 1))
        await Worker(rt, version="v1").drain()
        info = await rt.get_run(run_id)
        assert info.status is RunStatus.PENDING and info.version is None
        await rewrite_log(rt, run_id, _started_in(LOG_FORMAT))
        newer = Worker(rt, version="v2", visibility_timeout=0)
        deadline = time.monotonic() + 5
        while (info := await rt.get_run(run_id)).status is not RunStatus.SUSPENDED:
            assert info.status is not RunStatus.PARKED, f"parked for {info.version}"
            assert time.monotonic() < deadline, "no worker took the run over"
            await newer.reclaim()
            await newer.drain()
            await asyncio.sleep(0.01)
        assert info.version == "v2"


def test_the_format_is_checked_before_the_log_is_read() -> None:
    """A newer form may change the shape of events this version knows (here a message
    without its topic), or the format's own (not a number): refused, not crashed on."""
    for log_format in (LOG_FORMAT + 1, "3.0"):
        claim = Claim(
            ClaimStatus.OK,
            fence="1",
            workflow="log_format_wf",
            events=[
                Event("1-0", "workflow.started", {"args": [], "scoped": log_format}),
                Event("2-0", "message.received", {"channel": "x", "payload": 1}),
            ],
        )
        with pytest.raises(LogFormatUnknown):
            Execution(
                None,  # type: ignore[arg-type]  (not reached: refused first)
                "r-1",
                get_workflow("log_format_wf"),
                claim,
                limits=Limits(),
                retention_seconds=60,
            )

"""Redis comes back empty (a restart without persistence, a failover to an empty replica):
the workers re-create their consumer groups and announce their workflows again, and runs
started afterwards complete — nothing stays pending or refused for ever.

Real processes: a private redis-server without persistence, a ``parley worker`` and a
``parley server`` that does not import the workflows (it learns them from the workers'
announcements)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from runtime.testing import RedisServer
from tests.processes import WorkerProcess
from tests.server.server_process import AUTH, ServerProcess

pytestmark = pytest.mark.e2e
APP = "tests.apps.restart_app"


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer("--appendonly", "no")
    yield server
    server.stop()


def start_run(api: str, deadline: float) -> str:
    """POST /api/runs until it is accepted (503 while Redis is down; 404 while the server
    has not yet heard of the workflow)."""
    last = ""
    while time.monotonic() < deadline:
        try:
            reply = httpx.post(
                f"{api}/api/runs",
                json={"workflow": "restart_echo", "args": ["hi"]},
                headers=AUTH,
                timeout=5,
            )
        except httpx.TransportError as exc:
            last = repr(exc)
        else:
            if reply.status_code == 201:
                run_id: str = reply.json()["run_id"]
                return run_id
            last = f"{reply.status_code} {reply.text}"
        time.sleep(0.1)
    raise AssertionError(f"no start accepted; last reply: {last}")


def wait_completed(api: str, run_id: str, deadline: float) -> None:
    status = ""
    while time.monotonic() < deadline:
        reply = httpx.get(f"{api}/api/runs/{run_id}", headers=AUTH, timeout=5)
        if reply.status_code == 200:
            status = reply.json()["status"]
            if status == "completed":
                return
        time.sleep(0.05)
    events = httpx.get(f"{api}/api/runs/{run_id}/events", headers=AUTH, timeout=5).text
    raise AssertionError(f"run {run_id} still {status!r}: {events[-1500:]}")


def test_runs_complete_after_redis_restarted_empty(redis_server: RedisServer) -> None:
    worker = WorkerProcess(redis_server.url, APP, lease=1.0)
    api = ServerProcess(redis_server.url)
    try:
        before = start_run(api.url, time.monotonic() + 10)
        wait_completed(api.url, before, time.monotonic() + 10)

        redis_server.kill()
        redis_server.start()  # no persistence: every key, group and announcement is gone
        restarted = time.monotonic()
        run_ids = [start_run(api.url, restarted + 15) for _ in range(3)]
        for run_id in run_ids:
            wait_completed(api.url, run_id, restarted + 15)
        elapsed = time.monotonic() - restarted
        print(f"\nruns started after the empty restart completed {elapsed:.2f} s after it")
        assert worker.proc.poll() is None  # healed, not exited
        assert "recreated" in worker.log()  # the repair is logged
    finally:
        api.stop()
        worker.stop()

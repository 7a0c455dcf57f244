"""A link expires with its hook on the deployment's clock (the store's), not on the clock
of the machine that serves the link: a server whose clock is 90 s ahead still accepts an
answer to a hook that has a minute left. The skew is real: the server process runs under
libfaketime, like the skewed workers of tests/runtime/test_clock_skew.py."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.processes import WorkerProcess
from tests.runtime.test_clock_skew import skewed_env

from .server_process import AUTH, ServerProcess

pytestmark = pytest.mark.e2e

LINK_KEYS = "k1=first-secret-0123456789"


@pytest.fixture
def skewed_server(redis_url: str) -> Iterator[ServerProcess]:
    worker = WorkerProcess(redis_url, "tests.server.apps")
    server = ServerProcess(redis_url, env={**skewed_env("+90s"), "PARLEY_LINK_KEYS": LINK_KEYS})
    try:
        yield server
    finally:
        server.stop()
        worker.stop()


def _pending_token(http: httpx.Client, run_id: str) -> str:
    deadline = time.monotonic() + 15
    while True:
        hooks = http.get(f"/api/runs/{run_id}", headers=AUTH).json()["pending_hooks"]
        if hooks:
            token: str = hooks[0]["token"]
            return token
        assert time.monotonic() < deadline, "the run never asked"
        time.sleep(0.05)


def test_a_server_whose_clock_is_ahead_accepts_a_link_before_its_hook_expires(
    skewed_server: ServerProcess,
) -> None:
    with httpx.Client(base_url=skewed_server.url, timeout=10) as http:
        started = http.post(
            "/api/runs",
            json={"workflow": "srv_approval", "kwargs": {"timeout": 60}},
            headers=AUTH,
        )
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        token = _pending_token(http, run_id)
        minted = http.post(f"/api/hooks/{token}/link", json={}, headers=AUTH)
        assert minted.status_code == 201, minted.text
        link = minted.json()["link"]
        # The hook has ~60 s left by the store's clock; by the server's own (90 s ahead),
        # it expired half a minute ago.
        left = minted.json()["expires_at"] - time.time()
        assert 45 < left <= 60, left

        page = http.get(f"/a/{link}")
        assert page.status_code == 200, page.text
        answered = http.post(f"/a/{link}", json={"payload": {"ok": True}})
        assert answered.status_code == 200, answered.text

        deadline = time.monotonic() + 15
        while (run := http.get(f"/api/runs/{run_id}", headers=AUTH).json())["status"] != (
            "completed"
        ):
            assert time.monotonic() < deadline, run
            time.sleep(0.05)
        assert run["result"] == {"ok": True}

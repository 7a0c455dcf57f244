"""A server app on real Redis with an in-process worker, driven by Starlette's TestClient."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

import examples.support_agent  # noqa: F401 - registers the demo workflow
import tests.server.apps  # noqa: F401 - registers the test workflows
from runtime import Runtime
from server import ServerConfig, create_app

API_KEY = "test-key-0123456789"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def make_client(redis_url: str, **config: Any) -> TestClient:
    """A server on ``redis_url``; the per-client rates are off and the chat workflow is the
    demo's unless ``config`` sets them (every request of a TestClient comes from one
    client)."""
    defaults = {"session_rate": "off", "message_rate": "off", "chat_workflow": "support_agent"}
    cfg = ServerConfig(api_key=API_KEY, **{**defaults, **config})
    app = create_app(Runtime(redis_url, partitions=4), API_KEY, run_worker=True, config=cfg)
    return TestClient(app)


@pytest.fixture
def client(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PARLEY_DEMO_CHUNK_DELAY", "0")
    with make_client(redis_url) as c:
        yield c


def wait_run(
    client: TestClient, run_id: str, until: Callable[[dict[str, Any]], bool], timeout: float = 10
) -> dict[str, Any]:
    """Poll GET /api/runs/{run_id} until ``until(run)`` holds; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}", headers=AUTH).json()
        if until(run):
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} never reached the condition; last: {run}")
        time.sleep(0.02)


def start_approval(client: TestClient, **kwargs: Any) -> tuple[str, str]:
    """Start ``srv_approval`` and wait for its pending hook; returns (run_id, token)."""
    r = client.post("/api/runs", json={"workflow": "srv_approval", "kwargs": kwargs}, headers=AUTH)
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    run = wait_run(client, run_id, lambda run: bool(run["pending_hooks"]))
    return run_id, run["pending_hooks"][0]["token"]


def events(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    r = client.get(f"/api/runs/{run_id}/events", headers=AUTH)
    assert r.status_code == 200, r.text
    result: list[dict[str, Any]] = r.json()["events"]
    return result

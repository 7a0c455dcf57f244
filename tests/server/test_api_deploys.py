"""The HTTP API of runs that outlive a deploy: blocked runs listed by status, the metric,
retry; runs listed by version."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from tests.apps import versions_app

from .conftest import AUTH, wait_run


@pytest.fixture(autouse=True)
def _variant() -> Iterator[None]:
    versions_app.VARIANT["name"] = "a"
    yield
    versions_app.VARIANT["name"] = "a"


def pending_token(client: TestClient, run_id: str) -> str:
    run = wait_run(client, run_id, lambda run: bool(run["pending_hooks"]))
    token: str = run["pending_hooks"][0]["token"]
    return token


def test_a_blocked_run_is_listed_counted_and_retried(client: TestClient) -> None:
    started = client.post("/api/runs", json={"workflow": "deploy_wf"}, headers=AUTH)
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    token = pending_token(client, run_id)
    versions_app.VARIANT["name"] = "rename"  # deployed while the run waits
    assert client.post(f"/api/hooks/{token}", json={"payload": "yes"}, headers=AUTH).is_success
    run = wait_run(client, run_id, lambda run: run["status"] == "blocked")
    assert run["error"]["code"] == "nondeterminism"
    assert run["error"]["recorded"] == "hook 'approve'" and run["error"]["now"] == "hook 'approval'"
    listed = client.get("/api/runs?status=blocked", headers=AUTH)
    assert [r["run_id"] for r in listed.json()["runs"]] == [run_id]
    assert "parley_runs_blocked 1.0" in client.get("/metrics").text
    # retry before the fix: blocked again, still not re-asked
    assert client.post(f"/api/runs/{run_id}/retry", headers=AUTH).status_code == 200
    run = wait_run(client, run_id, lambda run: run["status"] == "blocked")
    versions_app.VARIANT["name"] = "a"
    retried = client.post(f"/api/runs/{run_id}/retry", headers=AUTH)
    assert retried.json() == {"run_id": run_id, "status": "pending"}
    token = pending_token(client, run_id)  # the run went on: now inside ask_step
    assert token.endswith("ask_step-0.confirm.0")
    assert client.post(f"/api/hooks/{token}", json={"payload": "ok"}, headers=AUTH).is_success
    run = wait_run(client, run_id, lambda run: run["status"] == "completed")
    assert run["result"]["answer"] == "yes"
    again = client.post(f"/api/runs/{run_id}/retry", headers=AUTH)
    assert again.status_code == 400 and "only a blocked run" in again.json()["message"]


def test_listing_runs_checks_its_filters(client: TestClient) -> None:
    assert client.get("/api/runs", headers=AUTH).json()["runs"] == []
    bad = client.get("/api/runs?status=sleeping", headers=AUTH)
    assert bad.status_code == 400 and "sleeping" in bad.json()["message"]
    assert client.get("/api/runs?limit=0", headers=AUTH).status_code == 400
    assert client.get("/api/runs").status_code == 401
    assert client.post(f"/api/runs/{'r-' + '0' * 24}/retry", headers=AUTH).status_code == 404

"""POST /api/runs with the caller's id or an Idempotency-Key: a retried start runs once."""

from __future__ import annotations

from starlette.testclient import TestClient

from .conftest import AUTH


def test_a_start_retried_with_its_idempotency_key_creates_one_run(client: TestClient) -> None:
    headers = {**AUTH, "Idempotency-Key": "checkout-91"}
    body = {"workflow": "srv_approval"}
    first = client.post("/api/runs", json=body, headers=headers)
    again = client.post("/api/runs", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json()["run_id"] == again.json()["run_id"]
    listed = client.get("/api/runs", headers=AUTH).json()["runs"]
    assert [r["run_id"] for r in listed] == [first.json()["run_id"]]


def test_a_run_with_the_callers_id(client: TestClient) -> None:
    started = client.post(
        "/api/runs", json={"workflow": "srv_approval", "run_id": "invoice-7"}, headers=AUTH
    )
    assert started.status_code == 201 and started.json()["run_id"] == "invoice-7"
    assert client.get("/api/runs/invoice-7", headers=AUTH).json()["workflow"] == "srv_approval"
    bad = client.post("/api/runs", json={"workflow": "srv_approval", "run_id": "a:b"}, headers=AUTH)
    assert bad.status_code == 400 and "a run id is" in bad.json()["message"]
    reserved = client.post(
        "/api/runs", json={"workflow": "srv_approval", "kwargs": {"run_id": "x"}}, headers=AUTH
    )
    assert reserved.status_code == 400 and "'run_id'" in reserved.json()["message"]
    assert len(client.get("/api/runs", headers=AUTH).json()["runs"]) == 1

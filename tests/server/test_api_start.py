"""POST /api/runs with the caller's id or an Idempotency-Key: a retried start runs once."""

from __future__ import annotations

from starlette.testclient import TestClient

from .conftest import AUTH, wait_run
from .test_ws import until


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


def test_a_run_started_into_a_session_is_its_conversation_until_it_ends(
    client: TestClient,
) -> None:
    """A run the API starts into a session (an agent that writes first) is the session's
    active run, as a visitor's would be: the visitor's next message is refused as busy
    while it waits for their answer (the widget answers its prompt, or queues the
    message), and the start itself is never refused for the session being busy."""
    session = client.post("/api/sessions").json()["session_id"]
    body = {"workflow": "srv_approval", "session": session}
    first = client.post("/api/runs", json=body, headers=AUTH)
    assert first.status_code == 201
    wait_run(client, first.json()["run_id"], lambda run: run["status"] == "suspended")
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        ws.receive_json()
        ws.send_json({"type": "message", "text": "hello", "client_id": "c1", "ref": "m"})
        reply = until(ws, lambda f: f.get("ref") == "m")[-1]
    assert reply["type"] == "error" and reply["error"] == "busy"
    assert first.json()["run_id"] in reply["message"]
    second = client.post("/api/runs", json=body, headers=AUTH)
    assert second.status_code == 201

"""Payload limits over the wire: an answer nested too deep or holding an integer beyond
±2**53 is refused over HTTP and over a real websocket, changes nothing, and the session
keeps working (a 254-deep answer used to be accepted, then close every socket of its
session with 1011 for ever)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient
from websockets.sync.client import ClientConnection, connect

from tests.processes import WorkerProcess, wait_until

from .conftest import AUTH, events, make_client, wait_run
from .server_process import AUTH as PROCESS_AUTH
from .server_process import ServerProcess


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    with make_client(redis_url) as c:
        yield c


def start_free(client: TestClient) -> tuple[str, str]:
    r = client.post("/api/runs", json={"workflow": "srv_free"}, headers=AUTH)
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    run = wait_run(client, run_id, lambda run: run["status"] == "suspended")
    return run_id, run["pending_hooks"][0]["token"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (json.dumps({"payload": nested(254)}).encode(), "at most 64 levels deep"),
        (b'{"payload": {"n": 1152921504606846976}}', "got 1152921504606846976"),  # 2**60
        # beyond 64 bits: orjson alone made it the float 1.8446744073709552e19, accepted
        (b'{"payload": 18446744073709551616}', "got 18446744073709551616"),
    ],
    ids=["254-deep", "2**60", "2**64"],
)
def test_http_answer_is_refused_and_changes_nothing(
    client: TestClient, body: bytes, says: str
) -> None:
    run_id, token = start_free(client)
    before = events(client, run_id)
    r = client.post(
        f"/api/hooks/{token}", content=body, headers={**AUTH, "content-type": "application/json"}
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_payload" and says in r.json()["message"]
    assert r.json()["run_id"] == run_id and r.json()["hook_id"] == token.split(":", 1)[1]
    assert events(client, run_id) == before
    run = wait_run(client, run_id, lambda run: True)
    assert [h["token"] for h in run["pending_hooks"]] == [token]
    r = client.post(f"/api/hooks/{token}", json={"payload": {"n": 2**53}}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert wait_run(client, run_id, lambda run: run["status"] == "completed")["result"] == {
        "n": 2**53
    }


def test_http_start_with_a_big_integer_starts_nothing(client: TestClient) -> None:
    r = client.post(
        "/api/runs",
        content=b'{"workflow": "srv_echo", "args": [18446744073709551616]}',
        headers={**AUTH, "content-type": "application/json"},
    )
    assert r.status_code == 422 and "integers must be within ±2**53" in r.json()["message"]
    r = client.post("/api/runs", json={"workflow": "srv_echo", "args": [nested(65)]}, headers=AUTH)
    assert r.status_code == 422 and "64 levels" in r.json()["message"]


def frames_until(ws: ClientConnection, pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    while True:
        frame: dict[str, Any] = json.loads(ws.recv(timeout=15))
        if pred(frame):
            return frame


def test_a_254_deep_answer_over_a_real_websocket_is_refused_and_the_session_keeps_working(
    redis_url: str,
) -> None:
    server = ServerProcess(redis_url)
    worker = WorkerProcess(redis_url, "tests.server.apps")
    try:
        http = httpx.Client(base_url=server.url, headers=PROCESS_AUTH, timeout=10)
        session = http.post("/api/sessions").json()["session_id"]
        r = http.post("/api/runs", json={"workflow": "srv_free", "session": session})
        run_id = r.json()["run_id"]
        ws_url = server.url.replace("http://", "ws://") + f"/ws/sessions/{session}"
        with connect(ws_url) as ws:
            prompt = frames_until(ws, lambda f: f["type"] == "prompt")
            wait_until(
                lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "suspended",
                10,
                "the suspension",
            )
            before = http.get(f"/api/runs/{run_id}/events").json()
            answer = {"type": "answer", "token": prompt["token"], "ref": 1}
            ws.send(json.dumps({**answer, "payload": nested(254)}))
            refused = frames_until(ws, lambda f: f.get("ref") == 1)
            assert refused["type"] == "error" and refused["error"] == "invalid_payload"
            assert "at most 64 levels deep" in refused["message"]
            ws.send(json.dumps({"type": "ping"}))
            assert frames_until(ws, lambda f: f["type"] in ("pong", "answered"))["type"] == "pong"
        assert http.get(f"/api/runs/{run_id}/events").json() == before
        # a new socket of the session replays the prompt, still pending, and takes an answer
        with connect(ws_url) as ws:
            again = frames_until(ws, lambda f: f["type"] == "prompt")
            assert again["token"] == prompt["token"] and again["state"] == "pending"
            ws.send(json.dumps({**answer, "payload": {"fine": nested(10)}, "ref": 2}))
            seen: dict[str, dict[str, Any]] = {}  # the ack and the announcement, any order
            while len(seen) < 2:
                frame = frames_until(ws, lambda f: f.get("ref") == 2 or f["type"] == "answered")
                seen[frame["type"]] = frame
            assert seen["ack"]["recorded"] is True
            assert seen["answered"]["payload"] == {"fine": nested(10)}
        wait_until(
            lambda: http.get(f"/api/runs/{run_id}").json()["status"] == "completed",
            15,
            "the run to complete",
        )
        http.close()
    finally:
        worker.stop()
        server.stop()

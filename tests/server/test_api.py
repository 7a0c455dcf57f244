"""The HTTP API through Starlette's TestClient: every endpoint and every error status."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from starlette.testclient import TestClient

from runtime import Runtime
from tests.raw_redis import raw

from .conftest import AUTH, events, start_approval, wait_run

UNKNOWN_RUN = "r-" + "0" * 24


def test_healthz_needs_no_key(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_metrics_expose_store_and_worker_figures(client: TestClient) -> None:
    started = client.post(
        "/api/runs", json={"workflow": "support_agent", "args": ["hello"]}, headers=AUTH
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    wait_run(client, run_id, lambda run: run["status"] in ("suspended", "completed"))
    text = client.get("/metrics").text
    assert 'parley_runs_total{event="started"} 1.0' in text
    assert "parley_runs_suspended " in text and "parley_hooks_pending " in text
    assert "parley_executions_total" in text  # the in-process worker's instruments


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/runs"),
        ("GET", f"/api/runs/{UNKNOWN_RUN}"),
        ("GET", f"/api/runs/{UNKNOWN_RUN}/events"),
        ("POST", f"/api/runs/{UNKNOWN_RUN}/cancel"),
        ("GET", "/api/hooks?status=pending"),
        ("POST", f"/api/hooks/{UNKNOWN_RUN}:h0.x"),
    ],
)
def test_api_refuses_requests_without_a_valid_key(
    client: TestClient, method: str, path: str
) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
        r = client.request(method, path, headers=headers, json={"payload": 1})
        assert r.status_code == 401, (headers, r.text)
        assert r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"].startswith("Bearer")


def test_start_run_get_result_and_events(client: TestClient) -> None:
    r = client.post(
        "/api/runs",
        json={"workflow": "srv_echo", "args": [7], "kwargs": {"twice": True}},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    run = wait_run(client, run_id, lambda run: run["status"] == "completed")
    assert run["result"] == [7, 7]
    assert run["error"] is None and run["pending_hooks"] == []
    types = [e["type"] for e in events(client, run_id)]
    assert types[0] == "workflow.started" and types[-1] == "workflow.completed"


def test_a_compacted_run_reads_the_same(client: TestClient, redis_url: str) -> None:
    """An ended run's log and hooks compacted into its archive: the events API and the
    run view return what they returned before."""
    run_id, token = start_approval(client)
    r = client.post(f"/api/hooks/{token}", json={"payload": {"ok": True}}, headers=AUTH)
    assert r.status_code < 300, r.text
    wait_run(client, run_id, lambda run: run["status"] == "completed")
    before_events = events(client, run_id)
    before_run = client.get(f"/api/runs/{run_id}", headers=AUTH).json()

    async def compact() -> int:
        async with Runtime(redis_url, partitions=4) as rt:
            return await raw(rt).compact([run_id])

    assert asyncio.run(compact()) == 1
    assert events(client, run_id) == before_events
    assert client.get(f"/api/runs/{run_id}", headers=AUTH).json() == before_run


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "malformed"),
        (b"", 400, "malformed"),
        (b"[1, 2]", 400, "malformed"),
        (b'{"args": []}', 400, "malformed"),
        (b'{"workflow": "srv_echo", "args": {}}', 400, "malformed"),
        (b'{"workflow": "srv_echo", "kwargs": []}', 400, "malformed"),
        (b'{"workflow": "srv_echo", "colour": "red"}', 400, "malformed"),
        (b'{"workflow": "srv_echo", "session": 5}', 400, "malformed"),
        (b'{"workflow": "no_such_workflow"}', 404, "workflow_not_found"),
        (b'{"workflow": "srv_echo", "session": "0123456789abcdefXYZ"}', 404, "session_not_found"),
        (b'{"workflow": "srv_echo", "session": "bad id!"}', 400, "usage_error"),
        (b'{"workflow": "srv_echo", "kwargs": {"session": "x"}}', 400, "malformed"),
    ],
)
def test_start_run_rejects_bad_requests(
    client: TestClient, body: bytes, status: int, code: str
) -> None:
    r = client.post("/api/runs", content=body, headers=AUTH)
    assert r.status_code == status, r.text
    assert r.json()["error"] == code
    assert r.json()["message"]


def test_a_content_length_of_other_digits_is_not_a_server_error(client: TestClient) -> None:
    """b"\\xb2" (latin-1 "²") passes str.isdigit() but not int(): it was a 500. It is no
    length, so the body is read (within the limit) as if none were declared. Sent through
    httpx's ASGI transport: it hands the header's bytes to the app as they are (the
    TestClient's re-encodes them as UTF-8)."""

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            body = b'{"workflow": "srv_echo", "args": [1]}'
            headers = {**AUTH, "content-length": b"\xb2"}
            return await http.post("/api/runs", content=body, headers=headers)

    assert client.portal is not None
    r = client.portal.call(post)
    assert r.status_code == 201, r.text


def test_oversized_bodies_are_refused(client: TestClient) -> None:
    # Over the server's body limit (256 KiB): refused before parsing.
    r = client.post("/api/runs", content=b"x" * (300 * 1024), headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (413, "request_too_large")
    # Under the body limit but over the runtime's 64 KiB input limit.
    r = client.post(
        "/api/runs", json={"workflow": "srv_echo", "args": ["y" * 70_000]}, headers=AUTH
    )
    assert (r.status_code, r.json()["error"]) == (413, "payload_too_large")
    assert client.get("/api/hooks", headers=AUTH).json() == {"hooks": []}


def test_start_run_bound_to_a_session(client: TestClient) -> None:
    session = client.post("/api/sessions").json()["session_id"]
    r = client.post(
        "/api/runs", json={"workflow": "srv_echo", "args": [1], "session": session}, headers=AUTH
    )
    assert r.status_code == 201
    run = wait_run(client, r.json()["run_id"], lambda run: run["status"] == "completed")
    assert run["session"] == session


def test_unknown_runs_are_404(client: TestClient) -> None:
    for path in (
        f"/api/runs/{UNKNOWN_RUN}",
        f"/api/runs/{UNKNOWN_RUN}/events",
        "/api/runs/not-a-run-id",
    ):
        r = client.get(path, headers=AUTH)
        assert (r.status_code, r.json()["error"]) == (404, "run_not_found"), path
    r = client.post(f"/api/runs/{UNKNOWN_RUN}/cancel", headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (404, "run_not_found")


def test_list_hooks_and_answer(client: TestClient) -> None:
    run_id, token = start_approval(client)
    hooks = client.get("/api/hooks?status=pending", headers=AUTH).json()["hooks"]
    assert [h["token"] for h in hooks] == [token]
    assert hooks[0]["prompt"] == "Approve the refund?"
    assert hooks[0]["schema"]["required"] == ["ok"]
    r = client.post(f"/api/hooks/{token}", json={"payload": {"ok": True}}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json() == {"token": token, "recorded": True, "duplicate": False}
    run = wait_run(client, run_id, lambda run: run["status"] == "completed")
    assert run["result"] == {"ok": True}
    # The same answer again: idempotent success. A different one: conflict.
    r = client.post(f"/api/hooks/{token}", json={"payload": {"ok": True}}, headers=AUTH)
    assert (r.status_code, r.json()["recorded"]) == (200, False)
    by_run = client.get(f"/api/hooks?status=all&run_id={run_id}", headers=AUTH).json()["hooks"]
    assert [(h["token"], h["status"]) for h in by_run] == [(token, "received")]
    assert client.get("/api/hooks", headers=AUTH).json() == {"hooks": []}


def test_conflicting_answer_is_409_and_changes_nothing(client: TestClient) -> None:
    run_id, token = start_approval(client)
    assert (
        client.post(f"/api/hooks/{token}", json={"payload": {"ok": True}}, headers=AUTH).status_code
        == 200
    )
    wait_run(client, run_id, lambda run: run["status"] == "completed")
    before = events(client, run_id)
    r = client.post(f"/api/hooks/{token}", json={"payload": {"ok": False}}, headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (409, "hook_already_answered")
    assert "different answer" in r.json()["message"]
    assert events(client, run_id) == before


def test_bad_answers_get_clear_errors_and_change_nothing(client: TestClient) -> None:
    run_id, token = start_approval(client)
    before = events(client, run_id)
    cases = [
        (f"/api/hooks/{token}", b'{"payload": {"ok": "yes"}}', 422, "invalid_payload"),
        (f"/api/hooks/{token}", b'{"payload": {"ok": true, "x": 1}}', 422, "invalid_payload"),
        (f"/api/hooks/{token}", b'{"answer": true}', 400, "malformed"),
        (f"/api/hooks/{token}", b"{oops", 400, "malformed"),
        (f"/api/hooks/{token}", b'"just a string"', 400, "malformed"),
        (f"/api/hooks/{token}", b'{"payload": "' + b"z" * 70_000 + b'"}', 413, "payload_too_large"),
        (f"/api/hooks/{token}", b"x" * (300 * 1024), 413, "request_too_large"),
        ("/api/hooks/not-a-token", b'{"payload": 1}', 400, "invalid_token"),
        ("/api/hooks/ab%20c:def", b'{"payload": 1}', 400, "invalid_token"),
        (f"/api/hooks/{run_id}:no.such.hook", b'{"payload": 1}', 404, "hook_not_found"),
        (f"/api/hooks/{UNKNOWN_RUN}:h0.x", b'{"payload": 1}', 404, "run_not_found"),
    ]
    for path, body, status, code in cases:
        r = client.post(path, content=body, headers=AUTH)
        assert (r.status_code, r.json()["error"]) == (status, code), (body[:40], r.text)
        assert r.json()["message"]
    assert (
        "does not match the hook's schema"
        in client.post(f"/api/hooks/{token}", json={"payload": {"ok": 1}}, headers=AUTH).json()[
            "message"
        ]
    )
    assert events(client, run_id) == before
    run = client.get(f"/api/runs/{run_id}", headers=AUTH).json()
    assert [h["token"] for h in run["pending_hooks"]] == [token]


def test_answer_to_an_expired_hook_is_410(client: TestClient) -> None:
    run_id, token = start_approval(client, timeout=0.3)
    run = wait_run(client, run_id, lambda run: run["status"] == "completed")
    assert run["result"] == "timed out"
    before = events(client, run_id)
    r = client.post(f"/api/hooks/{token}", json={"payload": {"ok": True}}, headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (410, "hook_expired")
    assert events(client, run_id) == before


def test_cancel_run_and_answer_to_a_cancelled_hook(client: TestClient) -> None:
    run_id, token = start_approval(client)
    r = client.post(f"/api/runs/{run_id}/cancel", json={"reason": 42}, headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (400, "malformed")
    r = client.post(f"/api/runs/{run_id}/cancel", json={"reason": "test"}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json() == {"run_id": run_id, "status": "cancelled"}
    assert client.get(f"/api/runs/{run_id}", headers=AUTH).json()["status"] == "cancelled"
    before = events(client, run_id)
    r = client.post(f"/api/hooks/{token}", json={"payload": {"ok": True}}, headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (410, "hook_cancelled")
    r = client.post(f"/api/runs/{run_id}/cancel", headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (410, "run_finished")
    assert events(client, run_id) == before


def test_list_hooks_rejects_bad_filters(client: TestClient) -> None:
    r = client.get("/api/hooks?status=nonsense", headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (400, "malformed")
    r = client.get("/api/hooks?status=received", headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (400, "usage_error")
    r = client.get(f"/api/hooks?status=all&run_id={UNKNOWN_RUN}", headers=AUTH)
    assert r.status_code == 200 and r.json() == {"hooks": []}


def test_sessions_are_created_without_a_key_and_unguessable(client: TestClient) -> None:
    ids = {client.post("/api/sessions").json()["session_id"] for _ in range(3)}
    assert len(ids) == 3
    assert all(len(i) >= 32 for i in ids)


def test_serves_the_demo_page_and_the_widget(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "parley-widget.js" in page.text
    js = client.get("/widget/parley-widget.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    assert client.get("/widget/parley-widget.css").status_code == 200
    assert client.get("/widget/nope.js").status_code == 404


def test_runs_and_hooks_listed_by_tag(client: TestClient) -> None:
    started = []
    for customer in ("acme", "acme", "globex"):
        r = client.post(
            "/api/runs",
            json={"workflow": "srv_approval", "tags": {"customer": customer, "tier": "gold"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
        started.append(r.json()["run_id"])
        time.sleep(0.005)  # newest first is by creation ms
    for run_id in started:
        wait_run(client, run_id, lambda run: bool(run["pending_hooks"]))
    page = client.get("/api/runs?tag=customer:acme", headers=AUTH).json()
    assert [r["run_id"] for r in page["runs"]] == started[1::-1]
    assert page["runs"][0]["tags"] == {"customer": "acme", "tier": "gold"}
    assert page["total"] == 2
    first = client.get("/api/runs?tag=tier:gold&limit=2", headers=AUTH).json()
    assert [r["run_id"] for r in first["runs"]] == started[:0:-1]
    assert first["total"] is None and first["next_offset"] == 2  # more, not counted
    both = client.get("/api/runs?tag=tier:gold&tag=customer:globex", headers=AUTH).json()
    assert [r["run_id"] for r in both["runs"]] == [started[2]]
    suspended = client.get("/api/runs?tag=customer:acme&status=completed", headers=AUTH).json()
    assert suspended["runs"] == []
    hooks = client.get("/api/hooks?tag=customer:globex", headers=AUTH).json()["hooks"]
    assert [h["run_id"] for h in hooks] == [started[2]]
    bad = client.get("/api/runs?tag=customer", headers=AUTH)
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_tag", bad.text
    bad = client.post(
        "/api/runs", json={"workflow": "srv_approval", "tags": {"customer": "a b"}}, headers=AUTH
    )
    assert bad.status_code == 400 and "value of tag 'customer'" in bad.json()["message"]

"""The real server process (uvicorn) over real sockets: API key, frame limits, session
isolation (acceptance 5), and ``parley demo`` on the embedded store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.processes import ROOT, wait_until

from .stack import Stack, free_port


def ws_url(base: str, session: str, after: str = "0-0") -> str:
    return base.replace("http://", "ws://") + f"/ws/sessions/{session}?after={after}"


def frames_until(ws: ClientConnection, pred: Callable[[dict[str, Any]], bool]) -> list[Any]:
    out = []
    while True:
        frame = json.loads(ws.recv(timeout=10))
        out.append(frame)
        if pred(frame):
            return out


def open_session(base: str) -> str:
    session: str = httpx.post(base + "/api/sessions").json()["session_id"]
    return session


def test_http_api_refuses_requests_without_the_key(stack: Stack) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}):
        r = httpx.get(stack.url + "/api/hooks", headers=headers)
        assert (r.status_code, r.json()["error"]) == (401, "unauthorized")
    assert stack.http.get("/api/hooks").status_code == 200
    assert httpx.get(stack.url + "/healthz").json() == {"status": "ok"}


def test_frame_limits_and_session_isolation_over_real_sockets(stack: Stack) -> None:
    session_a, session_b = open_session(stack.url), open_session(stack.url)
    with connect(ws_url(stack.url, session_b)) as ws_b:
        ws_b.send(json.dumps({"type": "message", "text": "my worker crashed"}))
        prompt = frames_until(ws_b, lambda f: f["type"] == "prompt")[-1]
    # the prompt is pushed before the suspension is recorded: wait for it to settle
    run_url = f"/api/runs/{prompt['run_id']}"
    wait_until(lambda: stack.http.get(run_url).json()["status"] == "suspended", 10, "suspension")
    before = stack.http.get(f"{run_url}/events").json()
    with connect(ws_url(stack.url, session_a), max_size=None) as ws_a:
        assert json.loads(ws_a.recv(timeout=10))["type"] == "ready"
        ws_a.send(json.dumps({"type": "answer", "token": prompt["token"], "payload": "x"}))
        assert json.loads(ws_a.recv(timeout=10))["error"] == "forbidden"
        ws_a.send("{broken")
        assert json.loads(ws_a.recv(timeout=10))["error"] == "malformed"
        ws_a.send(json.dumps({"type": "message", "text": "y" * 100_000}))
        reply = json.loads(ws_a.recv(timeout=10))
        assert reply["error"] == "frame_too_large" and "65536" in reply["message"]
        # Beyond the protocol limit (1 MiB) uvicorn closes the socket: 1009 "too big".
        ws_a.send("z" * (2 * 1024 * 1024))
        with pytest.raises(ConnectionClosed) as closed:
            ws_a.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert stack.http.get(f"/api/runs/{prompt['run_id']}/events").json() == before
    assert [h["token"] for h in stack.pending_hooks()] == [prompt["token"]]


def test_parley_demo_runs_on_the_embedded_store_with_volatile() -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PARLEY_API_KEY")}
    env["PARLEY_DEMO_CHUNK_DELAY"] = "0"
    with tempfile.NamedTemporaryFile(prefix="parley-demo-", suffix=".log") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", "demo", "--volatile", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    if httpx.get(base + "/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None, Path(log.name).read_text()
                assert time.monotonic() < deadline, "parley demo did not start"
                time.sleep(0.05)
            assert "parley-widget.js" in httpx.get(base + "/").text
            session = open_session(base)
            with connect(ws_url(base, session)) as ws:
                ws.send(json.dumps({"type": "message", "text": "please email me"}))
                prompt = frames_until(ws, lambda f: f["type"] == "prompt")[-1]
                assert prompt["schema"]["type"] == "string" and "enum" not in prompt["schema"]
                ws.send(
                    json.dumps(
                        {"type": "answer", "token": prompt["token"], "payload": "ada@example.org"}
                    )
                )
                frames = frames_until(ws, lambda f: f["type"] == "status")
            assert frames[-1]["status"] == "completed"
            text = "".join(f["delta"] for f in frames if f["type"] == "text")
            assert "ada@example.org" in text
            output = Path(log.name).read_text()
            assert "store memory://" in output and "HTTP API key" in output
        finally:
            proc.terminate()
            # uvicorn shuts down gracefully, then re-raises SIGTERM (exit status -15).
            assert proc.wait(timeout=15) in (0, -15)
        assert "Application shutdown complete" in Path(log.name).read_text()

"""A ``parley server`` told to stop (SIGTERM: a deploy, ``docker compose stop``) stops,
also while an operator's console is open.

uvicorn waits for every open response to end before the app hears of the shutdown, and the
console's live stream of pending hooks (server-sent events) never ended by itself: the
process waited until its supervisor killed it (here after 10 s; in-flight requests, and
the demo's in-process worker, cut short). Now the stream ends as the shutdown begins, and
the console reconnects (widget/console/api.js tries again every second), to the server
that replaced this one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from runtime.testing import free_port
from server.cli import GRACEFUL_SHUTDOWN_SECONDS, STARTUP_FAILURE
from tests.processes import ROOT, WorkerProcess

from .server_process import API_KEY, AUTH, ServerProcess

# uvicorn, done shutting down, raises the signal it caught again: the process ends as
# SIGTERM's (a SIGKILL would end it as -9)
GRACEFUL = (0, -signal.SIGTERM)


def _read_live(server: ServerProcess, chunks: list[bytes], opened: threading.Event) -> None:
    with (
        httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client,
        client.stream("GET", "/api/live") as response,
    ):
        assert response.status_code == 200
        for chunk in response.iter_raw():
            chunks.append(chunk)
            opened.set()
    chunks.append(b"<end>")  # the server ended the stream


def test_a_server_with_a_console_open_stops_when_told(redis_url: str) -> None:
    server = ServerProcess(redis_url)
    try:
        chunks: list[bytes] = []
        opened = threading.Event()
        reader = threading.Thread(target=_read_live, args=(server, chunks, opened), daemon=True)
        reader.start()
        assert opened.wait(10), "the live stream sent nothing"
        server.process.send_signal(signal.SIGTERM)
        try:
            code = server.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            raise AssertionError("the server was still running 5 s after SIGTERM") from None
        assert code in GRACEFUL, server.log()
        reader.join(5)
        assert chunks[-1] == b"<end>"  # the stream ended cleanly, not cut
    finally:
        server.stop()


def test_a_server_stops_at_once_without_a_console(redis_url: str) -> None:
    """(The control: the same stop, nothing open.)"""
    server = ServerProcess(redis_url)
    try:
        began = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=5) in GRACEFUL, server.log()
        assert time.monotonic() - began < 5
    finally:
        server.stop()


def test_ctrl_c_stops_the_server_without_a_traceback(redis_url: str) -> None:
    server = ServerProcess(redis_url)
    try:
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=5) == 0, server.log()
        assert "Traceback" not in server.log()
    finally:
        server.stop()


def test_a_server_that_cannot_start_fails(tmp_path: Path) -> None:
    """The store unreachable at startup: exit status 3 (uvicorn's), so that a supervisor
    restarts it, not 0."""
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "runtime.cli", "server", "--app", "tests.server.apps"),
                *("--redis", nobody, "--host", "127.0.0.1", "--port", str(free_port())),
            ],
            cwd=ROOT,
            env={**os.environ, "PARLEY_API_KEY": API_KEY},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            code = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    assert code == STARTUP_FAILURE, log.read_text(errors="replace")


def _pending_hooks(server: ServerProcess, runs: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        pending = httpx.get(server.url + "/api/hooks", headers=AUTH, timeout=10).json()
        if len(pending["hooks"]) >= runs:
            return
        assert time.monotonic() < deadline, f"{len(pending['hooks'])} of {runs} hooks asked"
        time.sleep(0.05)


def _open_and_never_read(server: ServerProcess, path: str) -> socket.socket:
    """A client that sends its request and stops reading: its receive window closes, so
    the server's send of a long response waits (uvicorn's flow control) for ever."""
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    client.connect(("127.0.0.1", server.port))
    client.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: {AUTH['Authorization']}\r\n\r\n".encode()
    )
    return client


def test_a_response_stuck_on_a_client_that_stopped_reading_ends_at_the_backstop(
    redis_url: str,
) -> None:
    """A console whose reader stalled (a laptop put to sleep mid-stream) keeps the live
    stream stuck in a send: it cannot notice the shutdown. uvicorn would wait for that
    response for ever; the backstop cancels it GRACEFUL_SHUTDOWN_SECONDS after the shutdown
    began, and the server still ends as a graceful stop does (before a supervisor's
    SIGKILL: Docker's is 10 s after SIGTERM)."""
    runs = 160
    worker = WorkerProcess(redis_url, "tests.server.apps")
    server = ServerProcess(redis_url)
    stalled: socket.socket | None = None
    try:
        document = "All work and no play makes Jack a dull boy. " * 1_400  # ~60 KB
        for _ in range(runs):
            started = httpx.post(
                server.url + "/api/runs",
                json={"workflow": "srv_review", "args": [document]},
                headers=AUTH,
                timeout=10,
            )
            assert started.status_code == 201, started.text
        _pending_hooks(server, runs)  # the live stream's first event: ~10 MB of prompts
        stalled = _open_and_never_read(server, "/api/live")
        time.sleep(1)  # for the first event to fill every buffer on the way (checked below)
        began = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        try:
            code = server.process.wait(timeout=GRACEFUL_SHUTDOWN_SECONDS + 10)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the server was still running {GRACEFUL_SHUTDOWN_SECONDS + 10} s after "
                "SIGTERM: nothing ended the stuck response"
            ) from None
        took = time.monotonic() - began
        assert code in GRACEFUL, server.log()
        # Not vacuous: the response was stuck (a live stream that could still send ends at
        # once, test_a_server_with_a_console_open_stops_when_told), and the backstop ended it.
        assert took >= GRACEFUL_SHUTDOWN_SECONDS - 0.5, (took, server.log())
    finally:
        if stalled is not None:
            stalled.close()
        server.stop()
        worker.stop()

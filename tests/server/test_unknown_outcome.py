"""A write whose connection to Redis failed after Redis applied it: the server must not
claim it failed. The 503 says the outcome is unknown, and the start sent again with the
same Idempotency-Key finds the run it made (one run, never two).

Real Redis behind a TCP proxy that lets commands through but drops Redis' replies: what
a stall or a connection cut mid-command does."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from runtime.testing import free_port

from .conftest import AUTH, make_client


class ReplyDroppingProxy:
    """Forwards TCP to ``target``; while :attr:`drop` is set, a reply from Redis closes the
    connection instead of reaching the client (the command has run)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self.drop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies and self.drop.is_set():
                    break
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()


@pytest.fixture
def proxied_url(redis_url: str) -> Iterator[tuple[str, ReplyDroppingProxy]]:
    parts = urlsplit(redis_url)
    proxy = ReplyDroppingProxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    yield f"redis://127.0.0.1:{proxy.port}{parts.path}", proxy
    proxy.close()


def test_a_start_whose_reply_was_lost_is_unknown_and_its_retry_finds_the_run(
    proxied_url: tuple[str, ReplyDroppingProxy], redis_url: str
) -> None:
    url, proxy = proxied_url
    headers = {**AUTH, "Idempotency-Key": "order-5521"}
    body = {"workflow": "srv_approval"}
    with make_client(url) as client:
        assert client.get("/api/runs", headers=AUTH).status_code == 200
        proxy.drop.set()
        lost = client.post("/api/runs", json=body, headers=headers)
        proxy.drop.clear()
        assert lost.status_code == 503
        assert lost.json()["outcome"] == "unknown"
        assert "Idempotency-Key" in lost.json()["message"]
        assert lost.headers["retry-after"] == "1"
        # Redis did create the run: the 503 was right not to say "not started".
        with make_client(redis_url) as direct:
            runs = direct.get("/api/runs", headers=AUTH).json()["runs"]
        assert len(runs) == 1
        again = client.post("/api/runs", json=body, headers=headers)
        assert again.status_code == 201
        assert again.json()["run_id"] == runs[0]["run_id"]
        assert len(client.get("/api/runs", headers=AUTH).json()["runs"]) == 1


def test_a_read_that_failed_is_only_retried_later(
    proxied_url: tuple[str, ReplyDroppingProxy],
) -> None:
    url, proxy = proxied_url
    with make_client(url) as client:
        proxy.drop.set()
        failed = client.get("/api/runs", headers=AUTH)
        proxy.drop.clear()
        assert failed.status_code == 503
        assert "outcome" not in failed.json()
        assert client.get("/api/runs", headers=AUTH).status_code == 200

"""Abuse limits for anonymous clients (server.abuse, server.slowloris): per-IP rates on
creating sessions and on chat messages, counted in the store's Redis (so they hold across
server processes), 429 + Retry-After and nothing recorded when refused, X-Forwarded-For
only from trusted proxies, and half-sent requests timed out by a real ``parley server``."""

from __future__ import annotations

import asyncio
import socket
import statistics
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from starlette.testclient import TestClient

from runtime import Runtime, cli
from server import ServerConfig, create_app
from server.abuse import AbuseLimits, RateLimited, check_trusted_proxies, client_key

from .conftest import API_KEY, wait_run
from .server_process import ServerProcess


def count_sessions(redis_url: str) -> int:
    client = redis.Redis.from_url(redis_url)
    try:
        return sum(1 for _ in client.scan_iter(match="*:session:*:meta", count=1000))
    finally:
        client.close()


def make(redis_url: str, **config: Any) -> TestClient:
    cfg = ServerConfig(api_key=API_KEY, **config)
    return TestClient(create_app(Runtime(redis_url, partitions=4), API_KEY, config=cfg))


def test_session_rate_refuses_with_429_and_retry_after_and_creates_nothing(
    redis_url: str,
) -> None:
    with make(redis_url, session_rate="3/hour") as client:
        assert [client.post("/api/sessions").status_code for _ in range(3)] == [201] * 3
        for _ in range(5):
            r = client.post("/api/sessions")
            assert r.status_code == 429
            assert r.json()["error"] == "rate_limited" and "at most 3/hour" in r.json()["message"]
            assert 1 <= int(r.headers["retry-after"]) <= 3600
        assert count_sessions(redis_url) == 3


@pytest.fixture
def chat(redis_url: str) -> Iterator[TestClient]:
    cfg = ServerConfig(
        api_key=API_KEY, chat_workflow="srv_echo", session_rate="off", message_rate="2/hour"
    )
    app = create_app(Runtime(redis_url, partitions=4), API_KEY, run_worker=True, config=cfg)
    with TestClient(app) as client:
        yield client


def test_message_rate_refuses_with_an_error_frame_and_records_nothing(chat: TestClient) -> None:
    session = chat.post("/api/sessions").json()["session_id"]
    rt: Runtime = chat.app.state.ctx.runtime  # type: ignore[attr-defined]
    assert chat.portal is not None
    with chat.websocket_connect(f"/ws/sessions/{session}") as ws:
        ws.receive_json()
        for n in range(2):
            ws.send_json({"type": "message", "text": f"hello {n}", "ref": n})
            ack = next(f for f in iter(ws.receive_json, None) if f.get("ref") == n)
            assert ack["type"] == "ack", ack
            wait_run(chat, ack["run_id"], lambda run: run["status"] == "completed")
        outbox_before = chat.portal.call(rt.read_outbox, session)
        ws.send_json({"type": "message", "text": "one too many", "ref": 9})
        refused = next(f for f in iter(ws.receive_json, None) if f.get("ref") == 9)
    assert refused["type"] == "error" and refused["error"] == "rate_limited"
    assert refused["retry_after"] >= 1
    assert chat.portal.call(rt.read_outbox, session) == outbox_before  # no visitor message
    assert len(chat.portal.call(rt.list_runs)) == 2


@pytest.mark.parametrize("setting", ["session_rate", "message_rate"])
async def test_a_request_one_limit_refuses_counts_against_none_of_the_others(
    redis_url: str, setting: str
) -> None:
    """``10/hour;2/minute``: a burst of ten is two served and eight refused by the
    per-minute limit, and the hourly limit counted only the two."""
    rates = {"session_rate": "off", "message_rate": "off", setting: "10/hour;2/minute"}
    abuse = AbuseLimits(redis_url, **rates)
    rate = abuse.sessions if setting == "session_rate" else abuse.messages
    peer = ("203.0.113.7", 5555)
    try:
        outcomes: list[int] = []
        for _ in range(10):
            try:
                await abuse.hit(rate, peer)
                outcomes.append(0)
            except RateLimited as refused:
                outcomes.append(refused.retry_after)
        assert outcomes[:2] == [0, 0] and all(1 <= wait <= 60 for wait in outcomes[2:])
        hourly, minutely = rate.items
        stats = await abuse.limiter.get_window_stats(hourly, rate.kind, client_key(peer))
        assert stats.remaining == 8
        stats = await abuse.limiter.get_window_stats(minutely, rate.kind, client_key(peer))
        assert stats.remaining == 0
    finally:
        await abuse.close()


async def _timed_post(http: httpx.AsyncClient, path: str, **kw: Any) -> tuple[int, float, str]:
    began = time.perf_counter()
    r = await http.post(path, **kw)
    return r.status_code, time.perf_counter() - began, r.headers.get("retry-after", "")


async def _flood_and_healthy(url: str) -> tuple[list[tuple[int, float, str]], list[float]]:
    flood_results: list[tuple[int, float, str]] = []
    healthy: list[float] = []
    limits = httpx.Limits(max_connections=32)
    async with (
        httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as flooder,
        # another client address on the loopback: 127.0.0.2 (the whole 127/8 is local)
        httpx.AsyncClient(
            base_url=url,
            timeout=30,
            transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2"),
        ) as good,
    ):
        flooding = True

        async def flood() -> None:
            nonlocal flooding
            sem = asyncio.Semaphore(32)

            async def one() -> None:
                async with sem:
                    flood_results.append(await _timed_post(flooder, "/api/sessions"))

            await asyncio.gather(*(one() for _ in range(2000)))
            flooding = False

        async def healthy_client() -> None:
            while flooding or len(healthy) < 40:
                path = "/api/sessions" if len(healthy) < 40 else "/healthz"
                if path == "/healthz":
                    began = time.perf_counter()
                    r = await good.get(path)
                    assert r.status_code == 200, r.status_code
                    healthy.append(time.perf_counter() - began)
                else:
                    status, took, _ = await _timed_post(good, path)
                    assert status == 201, status
                    healthy.append(took)
                await asyncio.sleep(0.01)

        await asyncio.gather(flood(), healthy_client())
    return flood_results, healthy


def test_a_flood_of_2000_sessions_from_one_ip_is_cut_to_the_rate(redis_url: str) -> None:
    server = ServerProcess(redis_url, {"PARLEY_SESSION_RATE": "50/hour"})
    try:
        flood, healthy = asyncio.run(_flood_and_healthy(server.url))
    finally:
        server.stop()
    statuses = [status for status, _, _ in flood]
    assert statuses.count(201) == 50 and statuses.count(429) == 1950
    assert all(int(after) >= 1 for status, _, after in flood if status == 429)
    assert count_sessions(redis_url) == 50 + 40  # the flood's 50 and the healthy client's
    ms = sorted(t * 1000 for t in healthy)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    flood_ms = sorted(t * 1000 for _, t, _ in flood)
    print(
        f"\nflood of 2000 POST /api/sessions (50/hour): 50 created, 1950 refused (429); "
        f"flood p50 {statistics.median(flood_ms):.1f} ms; healthy client from 127.0.0.2: "
        f"{len(ms)} requests, p50 {statistics.median(ms):.1f} ms, p99 {p99:.1f} ms"
    )


def test_the_rate_holds_across_two_server_processes_sharing_redis(redis_url: str) -> None:
    env = {"PARLEY_SESSION_RATE": "10/hour"}
    servers = [ServerProcess(redis_url, env), ServerProcess(redis_url, env)]
    try:
        statuses = [httpx.post(servers[n % 2].url + "/api/sessions").status_code for n in range(30)]
    finally:
        for server in servers:
            server.stop()
    assert statuses.count(201) == 10 and statuses.count(429) == 20
    assert count_sessions(redis_url) == 10


def test_x_forwarded_for_is_believed_only_from_trusted_proxies(redis_url: str) -> None:
    def statuses(url: str, client: str, n: int) -> list[int]:
        headers = {"X-Forwarded-For": client}
        return [httpx.post(url + "/api/sessions", headers=headers).status_code for _ in range(n)]

    behind_proxy = ServerProcess(
        redis_url, {"PARLEY_SESSION_RATE": "2/hour", "PARLEY_TRUSTED_PROXIES": "127.0.0.1"}
    )
    try:
        assert statuses(behind_proxy.url, "203.0.113.7", 3) == [201, 201, 429]
        assert statuses(behind_proxy.url, "203.0.113.8", 1) == [201]  # another client
    finally:
        behind_proxy.stop()
    exposed = ServerProcess(redis_url, {"PARLEY_SESSION_RATE": "2/hour"})
    try:
        # not trusted: the header is the client's own claim, and every claim is 127.0.0.1
        assert statuses(exposed.url, "198.51.100.1", 2) == [201, 201]
        assert statuses(exposed.url, "198.51.100.2", 1) == [429]
    finally:
        exposed.stop()


def _closed_within(sock: socket.socket, bound: float) -> tuple[bytes, float]:
    """What the server sent before closing the connection, and how long that took; fails
    (socket timeout) if it is still open after ``bound`` seconds."""
    sock.settimeout(bound)
    began, received = time.monotonic(), b""
    while chunk := sock.recv(4096):
        received += chunk
    return received, time.monotonic() - began


def test_half_sent_requests_are_timed_out_by_a_real_server(redis_url: str) -> None:
    server = ServerProcess(redis_url, {"PARLEY_REQUEST_TIMEOUT": "1"})
    try:
        host, port = "127.0.0.1", server.port
        took = {}
        with socket.create_connection((host, port)) as idle:  # sends nothing at all
            received, took["idle"] = _closed_within(idle, 30)
            assert received.startswith(b"HTTP/1.1 408")
        with socket.create_connection((host, port)) as headers:
            headers.sendall(b"POST /api/sessions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            received, took["headers"] = _closed_within(headers, 30)
            assert received.startswith(b"HTTP/1.1 408")
        with socket.create_connection((host, port)) as body:
            body.sendall(
                b"POST /api/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Authorization: Bearer x\r\nContent-Length: 100\r\n\r\n{"work'
            )
            _received, took["body"] = _closed_within(body, 30)
        with socket.create_connection((host, port)) as kept:  # a second, half-sent request
            kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            kept.settimeout(30)
            assert kept.recv(4096).startswith(b"HTTP/1.1 200")
            kept.sendall(b"GET /healthz HTTP/1.1\r\nHo")
            received, took["kept-alive"] = _closed_within(kept, 30)
        # a whole request is served as before
        assert httpx.get(server.url + "/healthz").status_code == 200
        print("\nhalf-sent requests closed after (s):", {k: round(v, 2) for k, v in took.items()})
    finally:
        server.stop()


@pytest.mark.parametrize("entry", ["10.0.0.1/24", "nginx", "10.0.0.0/33", "::1/200"])
def test_a_malformed_trusted_proxy_is_refused_at_startup(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], entry: str
) -> None:
    """uvicorn takes an entry that is no IP or network (host bits set, a hostname) as a
    literal no peer matches: every proxy's X-Forwarded-For would be ignored, silently."""
    monkeypatch.setenv("PARLEY_API_KEY", API_KEY)
    monkeypatch.setenv("PARLEY_TRUSTED_PROXIES", f"10.1.0.0/16, 127.0.0.1, ::1, *, {entry}")
    with socket.socket() as taken:  # were it to start anyway, it fails at once (status 3)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert cli.main(["server", "--redis", "memory://", "--port", port]) == 2
    said = capsys.readouterr()
    assert f"parley server: PARLEY_TRUSTED_PROXIES: {entry!r} is not an IP" in said.err
    assert "parley server on" not in said.out
    check_trusted_proxies(["10.1.0.0/16", "127.0.0.1", "::1", "fd00::/8", "*"], "X")

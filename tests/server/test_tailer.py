"""The shared outbox tailer: many sockets per process, subscriptions picked up while the
reader is blocked, and a slow socket dropped without holding up the others."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import orjson
import pytest
import redis
import redis.asyncio as aioredis
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from runtime import Runtime
from server.tailer import CLOSE_TOO_SLOW, OutboxTailer, Subscription
from server.ws import SessionSocket
from tests.raw_redis import raw

from .conftest import AUTH, make_client
from .test_ws import new_session

BLOCK_MS = 2_000  # the longest block allowed (MAX_BLOCK_SECONDS)


def same_partition_sessions(rt: Runtime, new: Any, n: int) -> list[str]:
    """``n`` new sessions whose outboxes share one partition (so one reader serves all)."""
    first = new()
    tag = rt.store.outbox_group(first)
    found = [first]
    while len(found) < n:
        session = new()
        if rt.store.outbox_group(session) == tag:
            found.append(session)
    return found


def test_300_sockets_on_one_server_all_get_their_prompts(client: TestClient) -> None:
    # More sockets than the Redis pool has connections (256): a read per socket would
    # starve; the tailer uses at most one connection per partition.
    n = 300
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    sessions = [new_session(client) for _ in range(n)]
    with contextlib.ExitStack() as stack:
        sockets = [
            stack.enter_context(client.websocket_connect(f"/ws/sessions/{s}")) for s in sessions
        ]
        for ws in sockets:
            assert ws.receive_json()["type"] == "ready"
        runs = {}
        for session in sessions:
            r = client.post(
                "/api/runs", json={"workflow": "srv_approval", "session": session}, headers=AUTH
            )
            assert r.status_code == 201, r.text
            runs[session] = r.json()["run_id"]
        for session, ws in zip(sessions, sockets, strict=True):
            frame = ws.receive_json()
            assert frame["type"] == "prompt" and frame["run_id"] == runs[session], frame
            assert frame["state"] == "pending"
        assert ctx.tailer.readers() <= ctx.runtime.partitions


async def _blocked_xread(observer: aioredis.Redis) -> bool:
    """True once a client of our database is blocked in an XREAD (the tailer's
    connection, blocked in Redis; other suites use other databases)."""
    db = str(observer.connection_pool.connection_kwargs.get("db", 0))
    clients: Any = await observer.client_list()
    return any(c["cmd"] == "xread" and "b" in c["flags"] and c["db"] == db for c in clients)


async def _until(cond: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await cond():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def test_a_subscription_added_while_the_reader_is_blocked_is_served_at_once(
    redis_url: str,
) -> None:
    async with Runtime(redis_url, partitions=4) as rt:
        observer = aioredis.Redis.from_url(redis_url)
        # BLOCK 0: the reader's XREAD never times out, so b can only be served if its
        # subscription ends the blocked read (by the wake stream) — whatever the timing.
        tailer = OutboxTailer(rt, block_ms=0, queue_size=100)
        try:
            a, b = same_partition_sessions(rt, rt.new_session_id, 2)
            sub_a = await tailer.subscribe(a, "0-0")
            await _until(lambda: _blocked_xread(observer))
            # The reader is blocked on a's outbox only; b's subscription must end that read.
            sub_b = await tailer.subscribe(b, "0-0")
            started = time.monotonic()
            entry_id = await rt.post_to_session(b, {"type": "text", "delta": "hi"})
            got = await asyncio.wait_for(sub_b.get(), timeout=5)  # (a guard against a hang)
            assert got == (entry_id, {"type": "text", "delta": "hi"})
            print(f"b served {1000 * (time.monotonic() - started):.1f} ms after its post")
            # a is still served, from its own cursor.
            entry_a = await rt.post_to_session(a, {"type": "text", "delta": "a"})
            assert (await asyncio.wait_for(sub_a.get(), timeout=5))[0] == entry_a
            assert tailer.readers() == 1
        finally:
            await tailer.close()
            await observer.aclose()


async def test_a_second_socket_with_an_older_cursor_gets_everything_once(
    redis_url: str,
) -> None:
    # Two pages of one session with different cursors share one outbox read. The race:
    # the older page subscribes while a read from the newer cursor has already returned
    # an entry; handing it that entry would skip the ones between the two cursors.
    async with Runtime(redis_url, partitions=4) as rt:
        observer = aioredis.Redis.from_url(redis_url)
        blocking = redis.Redis.from_url(redis_url)  # its calls do not yield to the loop
        tailer = OutboxTailer(rt, block_ms=BLOCK_MS, queue_size=100)
        try:
            session = rt.new_session_id()
            ids = [await rt.post_to_session(session, {"n": i}) for i in range(3)]
            new = await tailer.subscribe(session, ids[-1])
            await _until(lambda: _blocked_xread(observer))
            # Appended while the loop is held: the reader's reply (this entry) is not
            # processed before the older page has subscribed.
            added: Any = blocking.xadd(
                raw(rt).session_key("outbox", session), {"m": orjson.dumps({"n": 3})}
            )
            ids.append(added.decode())
            old = await tailer.subscribe(session, ids[0])

            async def drain(sub: Subscription, k: int) -> list[str]:
                return [(await sub.get())[0] for _ in range(k)]

            assert await asyncio.wait_for(drain(old, 3), timeout=5) == ids[1:]
            assert await asyncio.wait_for(drain(new, 1), timeout=5) == ids[3:]
            entry = await rt.post_to_session(session, {"n": 4})
            assert await asyncio.wait_for(drain(old, 1), timeout=5) == [entry]
            assert await asyncio.wait_for(drain(new, 1), timeout=5) == [entry]
        finally:
            await tailer.close()
            await observer.aclose()
            blocking.close()


def test_a_slow_socket_is_closed_and_the_others_keep_their_pace(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue_size, n = 5, 20
    gate = threading.Event()  # the slow page "reads" again once set
    slow: set[str] = set()
    send = SessionSocket.send

    async def stalling_send(self: SessionSocket, frame: dict[str, Any]) -> None:
        if self.session in slow and "id" in frame:
            await asyncio.to_thread(gate.wait, 30)
        await send(self, frame)

    monkeypatch.setattr(SessionSocket, "send", stalling_send)
    with make_client(redis_url, ws_queue_size=queue_size) as client:
        rt: Runtime = client.app.state.ctx.runtime  # type: ignore[attr-defined]
        slow_session, fast_session = same_partition_sessions(rt, lambda: new_session(client), 2)
        slow.add(slow_session)
        portal = client.portal
        assert portal is not None
        try:
            with (
                client.websocket_connect(f"/ws/sessions/{slow_session}") as slow_ws,
                client.websocket_connect(f"/ws/sessions/{fast_session}") as fast_ws,
            ):
                slow_ws.receive_json()
                fast_ws.receive_json()
                for i in range(n):
                    for session in (slow_session, fast_session):
                        portal.call(rt.post_to_session, session, {"n": i})
                # All of the fast page's messages arrive while the slow one is stuck.
                assert [fast_ws.receive_json()["n"] for _ in range(n)] == list(range(n))
                gate.set()
                first = slow_ws.receive_json()
                assert first["n"] == 0
                with pytest.raises(WebSocketDisconnect) as closed:
                    slow_ws.receive_json()
                assert closed.value.code == CLOSE_TOO_SLOW
                # The fast page is still served.
                portal.call(rt.post_to_session, fast_session, {"n": n})
                assert fast_ws.receive_json()["n"] == n
            # The slow page reconnects with its last id and gets the rest, once.
            slow.clear()
            with client.websocket_connect(f"/ws/sessions/{slow_session}?after={first['id']}") as ws:
                ws.receive_json()
                assert [ws.receive_json()["n"] for _ in range(n - 1)] == list(range(1, n))
        finally:
            gate.set()

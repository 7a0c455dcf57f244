"""Store URLs: a unix socket works like TCP (a real redis-server listening on a socket)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import Runtime, Worker, hook, workflow
from runtime.store.redis._connect import connect
from runtime.testing import RedisServer


@pytest.fixture
def socket_redis(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "redis.sock"
    server = RedisServer("--unixsocket", str(path), "--unixsocketperm", "700")
    try:
        yield path
    finally:
        server.stop()


@workflow(name="socket_wf")
async def socket_wf() -> object:
    return await hook("over_a_socket")


async def test_a_unix_socket_url_serves_a_whole_run(socket_redis: Path) -> None:
    async with Runtime(f"unix://{socket_redis}", partitions=2) as rt:
        run_id = await rt.start(socket_wf)
        worker = Worker(rt)
        await worker.drain()
        [pending] = await rt.list_hooks(run_id=run_id)
        await rt.resume_hook(pending.token, "yes")
        await worker.drain()
        assert await rt.wait(run_id, timeout=5) == "yes"


async def test_a_blocking_read_the_embedded_store_cancelled_takes_no_later_entry() -> None:
    """As Redis does when a client goes away: a worker stopped during its blocking read of
    tasks, the next task was delivered to that read (fakeredis serves a blocking command
    until its timeout) and waited in a pending list nobody reads for."""
    client = connect(f"memory://{uuid.uuid4().hex}")
    await client.xgroup_create("s", "g", id="0", mkstream=True)
    reading = asyncio.ensure_future(client.xreadgroup("g", "c1", {"s": ">"}, block=5000))
    await asyncio.sleep(0.05)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    await client.xadd("s", {"r": "x"})
    await asyncio.sleep(0.05)
    assert (await client.xpending("s", "g"))["pending"] == 0
    assert len(await client.xreadgroup("g", "c2", {"s": ">"})) == 1  # for any consumer
    await client.aclose()

"""Store URLs: a unix socket works like TCP (a real redis-server listening on a socket)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import Runtime, Worker, hook, workflow
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

"""Which master a ``redis+sentinel://`` store connects to when the sentinels disagree
(runtime/store/redis/_sentinel.py): the one named with the newest configuration epoch,
whichever sentinel the URL lists first.

The disagreement is real and lasting here: two independent masters, one sentinel that
monitors the "old" one at configuration epoch 1 (it never learned of a promotion) and two
that monitor the "new" one at epoch 2 — what a failover leaves for the seconds until every
sentinel has heard of it, while the old master, restarted, answers as a master of its own.
Each sentinel watches only its own master's hello channel, so none of them corrects the
stale one during the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from runtime import RunNotFound, Runtime, hook, workflow
from runtime.settings import SOCKET_TIMEOUT_SECONDS
from runtime.testing import RedisServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

SERVICE = "parley"


@dataclass
class SplitView:
    old: RedisServer
    new: RedisServer
    stale: int  # the port of the sentinel naming the old master
    current: list[int]  # the ports of those naming the new one
    stale_pid: int

    def url(self, sentinels: list[int]) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"


def _sentinel(folder: Path, n: int, master: int, epoch: int) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    conf = folder / f"sentinel-{n}.conf"  # (a sentinel rewrites its config: its own file)
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
        f"sentinel monitor {SERVICE} 127.0.0.1 {master} 1\n"
        f"sentinel config-epoch {SERVICE} {epoch}\n"
        f"sentinel current-epoch {epoch}\n"
    )
    proc = subprocess.Popen(
        ["redis-server", str(conf), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return port, proc


def _names(port: int) -> tuple[int, int]:
    """(the port of the master the sentinel on ``port`` names, its epoch), once it sees
    that master up."""
    client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
    deadline = time.monotonic() + 15
    try:
        while True:
            try:
                state = client.sentinel_master(SERVICE)
                if not state["is_sdown"] and state["is_master"]:
                    return int(state["port"]), int(state["config-epoch"])
            except (redis.ConnectionError, redis.ResponseError):
                pass
            assert time.monotonic() < deadline, f"the sentinel on {port} names no live master"
            time.sleep(0.05)
    finally:
        client.close()


@pytest.fixture(scope="module")
def split_view() -> Iterator[SplitView]:
    folder = Path(tempfile.mkdtemp(prefix="parley-split-sentinels-"))
    old, new = RedisServer(), RedisServer()
    sentinels = [
        _sentinel(folder, 0, old.port, epoch=1),
        _sentinel(folder, 1, new.port, epoch=2),
        _sentinel(folder, 2, new.port, epoch=2),
    ]
    try:
        ports = [port for port, _proc in sentinels]
        view = SplitView(old, new, ports[0], ports[1:], sentinels[0][1].pid)
        # the disagreement the tests rely on, seen from the sentinels themselves
        assert _names(view.stale) == (old.port, 1)
        assert [_names(port) for port in view.current] == [(new.port, 2)] * 2
        yield view
    finally:
        for _port, proc in sentinels:
            proc.kill()
            proc.wait(timeout=10)
        old.stop()
        new.stop()


@workflow(name="split_view_wf")
async def split_view_wf() -> object:
    return await hook("q")


@pytest.mark.parametrize("stale_first", [True, False], ids=["stale-listed-first", "stale-last"])
async def test_the_store_connects_to_the_master_with_the_newest_epoch(
    split_view: SplitView, stale_first: bool
) -> None:
    """A run started on the new master is found through the sentinels; the stale
    sentinel's master (which holds a run of its own) is never read."""
    ordered = (
        [split_view.stale, *split_view.current]
        if stale_first
        else [*split_view.current, split_view.stale]
    )
    async with Runtime(split_view.new.url, partitions=4) as on_new:
        on_new_run = await on_new.start(split_view_wf)
    async with Runtime(split_view.old.url, partitions=4) as on_old:
        on_old_run = await on_old.start(split_view_wf)
    try:
        async with Runtime(split_view.url(ordered), partitions=4) as rt:
            # several connections: each new one asks the sentinels again
            infos = [await rt.get_run(on_new_run) for _ in range(3)]
            assert {info.run_id for info in infos} == {on_new_run}
            with pytest.raises(RunNotFound):
                await rt.get_run(on_old_run)
            port = int((await rt.store.client.info("server"))["tcp_port"])  # type: ignore[attr-defined]
            assert port == split_view.new.port
    finally:
        for server in (split_view.old, split_view.new):
            client = redis.Redis(port=server.port)
            client.flushall()
            client.close()


async def test_a_sentinel_that_hangs_does_not_hold_a_new_connection(split_view: SplitView) -> None:
    """Its answer is awaited only a moment once another sentinel named a live master, not
    for the socket timeout (10 s) on every new connection. (A paused process still takes
    connections: its kernel completes them.)"""
    async with Runtime(split_view.new.url, partitions=4) as on_new:
        run_id = await on_new.start(split_view_wf)
    os.kill(split_view.stale_pid, signal.SIGSTOP)
    try:
        began = time.monotonic()  # (connecting asks the sentinels too)
        async with Runtime(
            split_view.url([split_view.stale, *split_view.current]), partitions=4
        ) as rt:
            assert (await rt.get_run(run_id)).run_id == run_id
            took = time.monotonic() - began
        assert took < SOCKET_TIMEOUT_SECONDS / 2, f"{took:.1f} s"
    finally:
        os.kill(split_view.stale_pid, signal.SIGCONT)
        client = redis.Redis(port=split_view.new.port)
        client.flushall()
        client.close()

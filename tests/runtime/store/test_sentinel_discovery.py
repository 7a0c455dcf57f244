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

import asyncio
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

from runtime import RunNotFound, Runtime, StoreUnavailable, hook, workflow
from runtime.settings import SOCKET_TIMEOUT_SECONDS
from runtime.store.redis._sentinel import NewestMasterSentinel
from runtime.testing import RedisServer, free_port
from tests.raw_redis import raw

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
            assert (await rt.get_run(on_new_run)).run_id == on_new_run
            with pytest.raises(RunNotFound):
                await rt.get_run(on_old_run)
            assert await _connected_ports(rt) == [split_view.new.port] * 3
    finally:
        _flush(split_view.old, split_view.new)


async def _connected_ports(rt: Runtime, connections: int = 3) -> list[int]:
    """The port of the server each of ``connections`` new connections reaches (each asks
    the sentinels again: the pool's connections are closed before each)."""
    client = raw(rt).client
    ports = []
    for _ in range(connections):
        await client.connection_pool.disconnect()
        ports.append(int((await client.info("server"))["tcp_port"]))
    return ports


def _flush(*servers: RedisServer) -> None:
    for server in servers:
        client = redis.Redis(port=server.port)
        client.flushall()
        client.close()


async def test_a_sentinel_that_answers_an_error_does_not_hide_the_others(
    split_view: SplitView,
) -> None:
    """Listed first: a port where a plain Redis runs (it refuses SENTINEL), then the stale
    sentinel; the master is still the one the others name."""
    plain = split_view.old.port
    url = split_view.url([plain, split_view.stale, *split_view.current])
    async with Runtime(url, partitions=4) as rt:
        assert await _connected_ports(rt) == [split_view.new.port] * 3


async def test_no_sentinel_answering_is_an_outage() -> None:
    """Every sentinel unreachable: StoreUnavailable (retried as any outage), not a
    redis-py error."""
    nobody = [free_port(), free_port()]
    url = f"redis+sentinel://{','.join(f'127.0.0.1:{p}' for p in nobody)}/{SERVICE}/0"
    with pytest.raises(StoreUnavailable, match="No master found"):
        async with Runtime(url, partitions=4) as rt:
            await rt.start(split_view_wf)


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
            assert await _connected_ports(rt) == [split_view.new.port] * 3
            took = time.monotonic() - began
        assert took < SOCKET_TIMEOUT_SECONDS / 2, f"{took:.1f} s"
    finally:
        os.kill(split_view.stale_pid, signal.SIGCONT)
        _flush(split_view.new)


class _Answering:
    """A sentinel's answer to SENTINEL MASTERS, as redis-py parses it (for the ranking
    rule alone: what real sentinels answer is tested above)."""

    def __init__(self, port: int, epoch: int, flags: str, delay: float) -> None:
        self.delay = delay
        self.state = {
            "name": SERVICE,
            "ip": "127.0.0.1",
            "port": port,
            "config-epoch": epoch,
            "flags": flags,
            "is_master": True,
            "is_sdown": False,
            "is_odown": False,
            "num-other-sentinels": 2,
        }

    async def sentinel_masters(self) -> dict[str, object]:
        await asyncio.sleep(self.delay)
        return {SERVICE: self.state}


@pytest.mark.parametrize(
    ("answers", "master"),
    [
        # the leader of a failover has the new epoch and still the old address until every
        # replica is reconfigured: a sentinel that is done names the new master
        ([(1, 2, "master,failover_in_progress"), (2, 2, "master")], 2),
        ([(2, 2, "master"), (1, 2, "master,failover_in_progress")], 2),
        # only the leader knows the new epoch: its answer is still the newest
        ([(1, 1, "master"), (3, 2, "master,failover_in_progress")], 3),
        ([(1, 1, "master"), (2, 2, "master"), (1, 1, "master")], 2),
    ],
)
async def test_the_newest_epoch_wins_and_at_an_equal_one_a_settled_sentinel(
    answers: list[tuple[int, int, str]], master: int
) -> None:
    sentinel = NewestMasterSentinel([("127.0.0.1", 1)])  # type: ignore[no-untyped-call]
    # (they answer in the order listed, within the answer window)
    sentinel.sentinels = [
        _Answering(port, epoch, flags, delay=0.02 * n)
        for n, (port, epoch, flags) in enumerate(answers)
    ]
    assert await sentinel.discover_master(SERVICE) == ("127.0.0.1", master)

"""Real processes for testing and benchmarking Parley applications: a private
``redis-server`` on a free loopback port, and ``parley worker`` processes that are ready
(consuming) before the constructor returns — or, with ``wait=False``, once
:meth:`WorkerProcess.wait_ready` returns, so several can start in parallel.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import redis

from ._faults import POINTS as CRASH_POINTS

__all__ = [
    "CRASH_POINTS",
    "RedisSentinels",
    "RedisServer",
    "WorkerProcess",
    "free_port",
    "port_is_free",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PortTaken(RuntimeError):
    """The port chosen for a server was bound by another process first."""


def port_is_free(port: int) -> bool:
    """Whether ``port`` can be bound on the loopback now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class RedisServer:
    """A redis-server on a free loopback port (or ``port``), its files in a private
    directory; ``extra`` are more redis-server arguments (``"--appendonly", "yes"``)."""

    def __init__(self, *extra: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="parley-redis-"))
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        for attempt in range(3):
            try:
                self.start()
                return
            except PortTaken:
                if port is not None or attempt == 2:
                    raise
                self.port = free_port()  # another process bound it first: take another

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        """Start (again, after :meth:`kill`: same port, same files) and wait until it
        answers with its data loaded."""
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.dir), "--save", "", "--logfile", str(self.dir / "redis.log"),
             *self.extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    # Only this server will do: free_port()'s port is free when chosen, and
                    # another process (a second test process) may bind it before this one.
                    answering = int(client.info("server")["process_id"])
                    # with AOF, wait until the file has been loaded
                    if (
                        answering == self.proc.pid
                        and client.info("persistence").get("loading", 0) == 0
                    ):
                        return
                except (redis.ConnectionError, redis.BusyLoadingError):
                    pass
                exited = self.proc.poll() is not None
                if exited and not port_is_free(self.port):
                    raise PortTaken(f"port {self.port} is taken by another process")
                if exited or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on {self.port} did not start")
                time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final fsync beyond what the config guarantees."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisSentinels:
    """A Sentinel deployment on free loopback ports: a master, ``replicas`` replicas and
    ``sentinels`` sentinels monitoring it as ``service`` (quorum ``quorum``), returned once
    every sentinel sees the replicas and the other sentinels. ``down_after_ms`` and
    ``failover_timeout_ms`` are short by default, so a test's failover takes seconds.
    ``server_args`` are more redis-server arguments for every data server (``"--appendonly",
    "yes"``: the persistence the README recommends for a Sentinel deployment)."""

    def __init__(
        self,
        *,
        replicas: int = 1,
        sentinels: int = 3,
        quorum: int = 2,
        service: str = "parley",
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
        server_args: tuple[str, ...] = (),
    ) -> None:
        self.service = service
        self.servers: list[RedisServer] = []
        self.sentinels: list[subprocess.Popen[bytes]] = []
        self.sentinel_ports: list[int] = []
        self.dir = Path(tempfile.mkdtemp(prefix="parley-sentinel-"))
        try:
            self.servers.append(RedisServer(*server_args))
            master = self.servers[0].port
            for _ in range(replicas):
                replica = RedisServer(*server_args, "--replicaof", "127.0.0.1", str(master))
                self.servers.append(replica)
            for n in range(sentinels):
                self._start_sentinel(n, master, quorum, down_after_ms, failover_timeout_ms)
            self.wait_healthy(replicas, sentinels - 1)
        except BaseException:
            self.stop()
            raise

    def _start_sentinel(
        self, n: int, master: int, quorum: int, down_after_ms: int, failover_timeout_ms: int
    ) -> None:
        port = free_port()
        conf = self.dir / f"sentinel-{n}.conf"  # a sentinel rewrites its config: its own file
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
            f"logfile {self.dir / f'sentinel-{n}.log'}\n"
            f"sentinel monitor {self.service} 127.0.0.1 {master} {quorum}\n"
            f"sentinel down-after-milliseconds {self.service} {down_after_ms}\n"
            f"sentinel failover-timeout {self.service} {failover_timeout_ms}\n"
            f"sentinel parallel-syncs {self.service} 1\n"
        )
        self.sentinels.append(
            subprocess.Popen(
                ["redis-server", str(conf), "--sentinel"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        self.sentinel_ports.append(port)

    def url(self, *, db: int = 0, query: str = "") -> str:
        """``redis+sentinel://`` with every sentinel (``query``: e.g. ``"wait=1"``)."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.service}/{db}" + (f"?{query}" if query else "")

    def _named_by(self, sentinel_port: int) -> tuple[str, int] | None:
        """The master's address as the sentinel on ``sentinel_port`` names it; None if it
        does not answer."""
        client = redis.Redis(port=sentinel_port, socket_timeout=1, decode_responses=True)
        try:
            reply: Any = client.sentinel_get_master_addr_by_name(self.service)
            return str(reply[0]), int(reply[1])
        except (redis.ConnectionError, redis.TimeoutError, TypeError):
            return None
        finally:
            client.close()

    def master(self) -> tuple[str, int] | None:
        """The master's address, as the first sentinel that answers names it."""
        for port in self.sentinel_ports:
            address = self._named_by(port)
            if address is not None:
                return address
        return None

    def master_server(self) -> RedisServer:
        """The server the sentinels name as the master."""
        address = self.master()
        if address is None:
            raise RuntimeError("no sentinel names a master")
        return next(server for server in self.servers if server.port == address[1])

    def wait_promoted(self, old: RedisServer, timeout: float = 30) -> RedisServer:
        """Until every sentinel names a master other than ``old`` and that server runs as a
        master: the failover is over, not merely begun. (Restarting a master that keeps
        nothing on disk before that lets a sentinel that has not yet learned of the
        promotion make the promoted replica a replica of the restarted, empty server: its
        data goes with the resync. Redis' replication guide warns of that restart.)"""
        deadline = time.monotonic() + timeout
        while True:
            named = {self._named_by(port) for port in self.sentinel_ports}
            if len(named) == 1 and (address := named.pop()) and address[1] != old.port:
                port = address[1]
                server = next(s for s in self.servers if s.port == port)
                client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
                try:
                    if client.info("replication")["role"] == "master":
                        return server
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                finally:
                    client.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the sentinels did not agree on a master other than {old.port}")
            time.sleep(0.05)

    def replica_servers(self) -> list[RedisServer]:
        master = self.master_server()
        return [server for server in self.servers if server is not master]

    def flushall(self) -> None:
        """Empty the master (its replicas follow)."""
        client = redis.Redis(port=self.master_server().port)
        try:
            client.flushall()
        finally:
            client.close()

    def wait_healthy(self, replicas: int, other_sentinels: int, timeout: float = 30) -> None:
        """Until every sentinel sees a master with ``replicas`` live replicas that are
        in sync and ``other_sentinels`` peers (after a start or a failover)."""
        deadline = time.monotonic() + timeout
        for port in self.sentinel_ports:
            client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
            try:
                while True:
                    try:
                        state: Any = client.sentinel_master(self.service)
                        replicas_seen: Any = client.sentinel_slaves(self.service)
                        live = [
                            r
                            for r in replicas_seen
                            if not r["is_sdown"] and r.get("master-link-status") == "ok"
                        ]
                        if (
                            state["num-other-sentinels"] >= other_sentinels
                            and len(live) >= replicas
                            and not state["is_sdown"]
                        ):
                            break
                    except (redis.ConnectionError, redis.ResponseError):
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"sentinel on {port} did not see a healthy master")
                    time.sleep(0.05)
            finally:
                client.close()

    def stop(self) -> None:
        for proc in self.sentinels:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        for server in self.servers:
            server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class WorkerProcess:
    """``parley worker --app ...`` in its own process (its log in a temporary file)."""

    def __init__(
        self,
        redis_url: str,
        apps: str | Iterable[str],
        *,
        partitions: int = 16,
        lease: float = 30.0,
        concurrency: int = 64,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        log_level: str = "INFO",
        cwd: str | Path | None = None,
        wait: bool = True,
    ) -> None:
        names = [apps] if isinstance(apps, str) else list(apps)
        app_args = [arg for name in names for arg in ("--app", name)]
        self.log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix="parley-worker-", suffix=".log"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", "worker", *app_args, "--redis", redis_url,
             "--partitions", str(partitions), "--lease", str(lease),
             "--concurrency", str(concurrency), "--log-level", log_level, *extra_args],
            cwd=cwd,
            env=dict(os.environ if env is None else env),
            stdout=subprocess.PIPE,
            stderr=self.log_file,
        )  # fmt: skip
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the worker printed its ready line (connected, announced, consuming)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline().decode()
                if line.startswith("parley worker ready"):
                    return
                if not line and self.proc.poll() is not None:
                    break
        raise RuntimeError(f"worker did not become ready; log:\n{self.log()}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return Path(self.log_file.name).read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def wait_exit(self, timeout: float = 20) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        """SIGTERM (a graceful stop), SIGKILL if it does not end in 15 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log_file.close()

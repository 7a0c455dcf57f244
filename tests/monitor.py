"""Every command a private redis-server executes, read by MONITOR on a connection of its
own and split by marks (an ``ECHO`` on another connection): what the tests that count
commands (round trips, idle cost) read."""

from __future__ import annotations

import threading
from typing import Any

import redis

from runtime.testing import RedisServer

MARK = "parley-test-mark:"


class MonitorFeed:
    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.entries: list[dict[str, Any]] = []
        self._ready = threading.Event()
        self._marker = redis.Redis(port=server.port)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("MONITOR did not start")

    def _read(self) -> None:
        client = redis.Redis(port=self.server.port)
        with client.monitor() as monitor:  # type: ignore[no-untyped-call]
            self._ready.set()
            while True:
                entry = monitor.next_command()
                self.entries.append(entry)
                if entry["command"] == f"ECHO {MARK}end":
                    return

    def mark(self, label: str) -> None:
        """A marker in the feed (its own connection): everything the test did before this
        call was executed before it."""
        self._marker.echo(f"{MARK}{label}")

    def end(self) -> None:
        """Ends the feed: every command executed before this call is in :attr:`entries`."""
        if self._thread.is_alive():
            self.mark("end")
            self._thread.join(10)
        assert not self._thread.is_alive(), "the MONITOR feed did not end"

    def close(self) -> None:
        self.end()
        self._marker.close()

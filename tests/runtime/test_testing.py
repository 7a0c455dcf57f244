"""runtime.testing's RedisServer answers for itself only: with the suite in two processes,
the port free_port() chose can be bound by the other process's server first, and a test
must then not use (and flush) that one."""

from __future__ import annotations

import pytest
import redis

from runtime.testing import PortTaken, RedisServer


def test_a_server_whose_port_another_redis_holds_is_refused_not_shared() -> None:
    first = RedisServer("--appendonly", "no")
    try:
        client = redis.Redis(port=first.port)
        client.set("mine", "the first server's")
        with pytest.raises(PortTaken, match=f"port {first.port} is taken"):
            RedisServer("--appendonly", "no", port=first.port)
        assert client.get("mine") == b"the first server's"
        client.close()
        # without a given port, a server always comes up on a port of its own
        second = RedisServer("--appendonly", "no")
        try:
            assert second.port != first.port
            assert redis.Redis(port=second.port).info("server")["process_id"] == second.pid
        finally:
            second.stop()
    finally:
        first.stop()

"""Private redis-server processes for tests that need their own (AOF, restarts, cluster).
One server: :class:`runtime.testing.RedisServer`; here the cluster of them."""

from __future__ import annotations

import random
import subprocess
import time

import redis

from runtime.testing import RedisServer, free_port, port_is_free

__all__ = ["RedisCluster", "RedisServer", "free_cluster_port", "free_port"]


def free_cluster_port() -> int:
    """A free port whose cluster-bus port (port + 10000) is free and valid too."""
    rng = random.Random()
    while True:
        port = rng.randrange(20000, 40000)
        if port_is_free(port) and port_is_free(port + 10000):
            return port


class RedisCluster:
    """A real 3-master Redis Cluster on free loopback ports (no replicas)."""

    def __init__(self, masters: int = 3) -> None:
        self.nodes = [
            RedisServer(
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "2000",
                "--appendonly",
                "no",
                port=free_cluster_port(),
            )
            for _ in range(masters)
        ]
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *[f"127.0.0.1:{n.port}" for n in self.nodes],
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
        deadline = time.monotonic() + 20
        for node in self.nodes:
            client = redis.Redis(port=node.port)
            try:
                while client.cluster("info").get("cluster_state") != "ok":
                    if time.monotonic() > deadline:
                        raise RuntimeError("the cluster did not converge")
                    time.sleep(0.05)
            finally:
                client.close()

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def flushall(self) -> None:
        for node in self.nodes:
            client = redis.Redis(port=node.port)
            try:
                client.flushall()
            finally:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

"""Connecting to Redis from a URL, and the script registry.

``redis://`` / ``rediss://`` / ``unix://``: a real Redis server.
``redis+cluster://host:port[,host:port...]``: a Redis Cluster (any reachable nodes; the
rest are discovered). ``memory://[name]``: an in-process fakeredis server (the embedded
default); runtimes in one process that use the same name share one store.
"""

from __future__ import annotations

from typing import Any, cast

import redis.asyncio as aioredis

from . import _scripts
from ._batch import Batcher, Script
from .errors import UsageError

_memory_servers: dict[str, Any] = {}


CLUSTER_SCHEME = "redis+cluster://"
# The longest BLOCK of any XREAD/XREADGROUP Parley sends.
MAX_BLOCK_SECONDS = 2.0


def is_cluster_url(url: str) -> bool:
    return url.startswith(CLUSTER_SCHEME)


def _cluster(url: str) -> aioredis.Redis:
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    nodes = []
    for part in url[len(CLUSTER_SCHEME) :].split("/", 1)[0].split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"expected 'redis+cluster://host:port[,host:port...]', got {url!r}")
        nodes.append(ClusterNode(host, int(port)))
    client = RedisCluster(
        startup_nodes=nodes,
        max_connections=256,
        socket_keepalive=True,
        socket_timeout=MAX_BLOCK_SECONDS * 5,
    )
    # RedisCluster offers the commands Parley uses with the same signatures; every
    # multi-key operation is a single-slot script, so nothing here needs cross-slot routing.
    return cast(aioredis.Redis, client)


def connect(url: str) -> aioredis.Redis:
    if is_cluster_url(url):
        return _cluster(url)
    if url.startswith("memory://"):
        import fakeredis

        name = url[len("memory://") :] or "default"
        server = _memory_servers.get(name)
        if server is None:
            server = _memory_servers[name] = fakeredis.FakeServer()
        client: aioredis.Redis = fakeredis.FakeAsyncRedis(server=server)
        return client
    if url.startswith(("redis://", "rediss://", "unix://")):
        # A blocking pool: under a burst, callers wait for a connection instead of failing.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=256,
            timeout=30,
            health_check_interval=15,
            socket_keepalive=True,
            # Longer than any blocking read Parley issues (MAX_BLOCK_SECONDS), so a
            # timeout means a dead server, not a quiet stream.
            socket_timeout=MAX_BLOCK_SECONDS * 5,
        )
        return aioredis.Redis(connection_pool=pool)
    raise UsageError(
        f"expected a Redis URL 'redis://host:port[/db]', 'rediss://...', 'unix://...', "
        f"'redis+cluster://host:port,...' or 'memory://[name]', got {url!r}"
    )


class Scripts:
    """The Lua scripts of :mod:`runtime._scripts`, called by EVALSHA through one
    auto-pipelining :class:`~runtime._batch.Batcher` (reloaded on NOSCRIPT)."""

    def __init__(self, client: aioredis.Redis, *, cluster: bool) -> None:
        batcher = Batcher(client, pipelined=not cluster)
        self.claim = Script(batcher, _scripts.CLAIM)
        self.apply = Script(batcher, _scripts.APPLY)
        self.resume = Script(batcher, _scripts.RESUME)
        self.fire_due = Script(batcher, _scripts.FIRE_DUE)
        self.cancel = Script(batcher, _scripts.CANCEL)
        self.heartbeat = Script(batcher, _scripts.HEARTBEAT)
        self.start = Script(batcher, _scripts.START)
        self.wait_state = Script(batcher, _scripts.WAIT_STATE)

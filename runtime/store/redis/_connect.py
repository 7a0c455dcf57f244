"""A Redis client from a URL.

``redis://`` / ``rediss://`` / ``unix://``: a real Redis server.
``redis+cluster://host:port[,host:port...]``: a Redis Cluster (any reachable nodes; the
rest are discovered). ``memory://[name]``: an in-process fakeredis server (the embedded
default); stores in one process that use the same name share it.
"""

from __future__ import annotations

from typing import Any, cast

import redis.asyncio as aioredis

from ...errors import UsageError
from ...settings import (
    HEALTH_CHECK_SECONDS,
    POOL_MAX_CONNECTIONS,
    POOL_WAIT_SECONDS,
    SOCKET_TIMEOUT_SECONDS,
)

CLUSTER_SCHEME = "redis+cluster://"
MEMORY_SCHEME = "memory://"
_memory_servers: dict[str, Any] = {}


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
        max_connections=POOL_MAX_CONNECTIONS,
        socket_keepalive=True,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
    )
    # RedisCluster offers the commands Parley uses with the same signatures; every
    # multi-key operation is a single-slot script, so nothing here needs cross-slot routing.
    return cast(aioredis.Redis, client)


def connect(url: str) -> aioredis.Redis:
    if is_cluster_url(url):
        return _cluster(url)
    if url.startswith(MEMORY_SCHEME):
        import fakeredis

        name = url[len(MEMORY_SCHEME) :] or "default"
        server = _memory_servers.get(name)
        if server is None:
            server = _memory_servers[name] = fakeredis.FakeServer()
        client: aioredis.Redis = fakeredis.FakeAsyncRedis(server=server)
        return client
    if url.startswith(("redis://", "rediss://", "unix://")):
        # A blocking pool: under a burst, callers wait for a connection instead of failing.
        # (TCP keepalive is a TCP option: a unix socket's connection takes none.)
        tcp = {} if url.startswith("unix://") else {"socket_keepalive": True}
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=POOL_MAX_CONNECTIONS,
            timeout=POOL_WAIT_SECONDS,
            health_check_interval=HEALTH_CHECK_SECONDS,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            **tcp,
        )
        return aioredis.Redis(connection_pool=pool)
    raise UsageError(
        f"expected a Redis URL 'redis://host:port[/db]', 'rediss://...', 'unix://...', "
        f"'redis+cluster://host:port,...' or 'memory://[name]', got {url!r}"
    )

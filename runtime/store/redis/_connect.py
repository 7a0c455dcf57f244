"""A Redis client from a URL.

``redis://`` / ``rediss://`` / ``unix://``: a real Redis server.
``redis+cluster://host:port[,host:port...]``: a Redis Cluster (any reachable nodes; the
rest are discovered). ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/
service[/db]``: the master of ``service`` as Redis Sentinel names it (sentinels on port
26379 unless given; the user and password are the data nodes'; ``sentinel_password=``
authenticates to the sentinels), followed through failovers. ``memory://[name]``: an
in-process fakeredis server (the embedded default); stores in one process that use the
same name share it.

Durability (``redis://``, ``rediss://``, ``unix://`` and ``redis+sentinel://`` only):
``?wait=N`` acknowledges a write only once N replicas confirmed it (``WAIT``), within
``wait_timeout=<ms>`` (default :data:`~runtime.settings.REPLICA_WAIT_TIMEOUT_MS`); see
``_durability``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.connection import BlockingConnectionPool
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from ...errors import UsageError
from ...settings import (
    HEALTH_CHECK_SECONDS,
    POOL_MAX_CONNECTIONS,
    POOL_WAIT_SECONDS,
    REPLICA_WAIT_TIMEOUT_MS,
    SOCKET_TIMEOUT_SECONDS,
)
from ._embedded import embedded_client
from ._sentinel import NewestMasterSentinel

CLUSTER_SCHEME = "redis+cluster://"
SENTINEL_SCHEME = "redis+sentinel://"
MEMORY_SCHEME = "memory://"
SINGLE_SCHEMES = ("redis://", "rediss://", "unix://")
SENTINEL_PORT = 26379
SENTINEL_FORM = "'redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]'"
# A WAIT holds its connection until it returns: it must end well before the socket timeout.
MAX_WAIT_TIMEOUT_MS = int(SOCKET_TIMEOUT_SECONDS * 1000) // 2
_DURABILITY_PARAMS = ("wait", "wait_timeout")


@dataclass(frozen=True, slots=True)
class Durability:
    """Acknowledge a write only once ``replicas`` replicas confirmed it (``WAIT``)."""

    replicas: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None


def is_cluster_url(url: str) -> bool:
    return url.startswith(CLUSTER_SCHEME)


def durability_of(url: str) -> Durability | None:
    """The ``wait``/``wait_timeout`` parameters of ``url``, checked; None without them.
    A malformed sentinel URL is refused here too: when the store is made, not connected."""
    if url.startswith(SENTINEL_SCHEME):
        parse_sentinel_url(url)
    params = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    if not any(name in params for name in _DURABILITY_PARAMS):
        return None
    if not url.startswith((*SINGLE_SCHEMES, SENTINEL_SCHEME)):
        raise UsageError(
            "expected '?wait=N' only on a 'redis://', 'rediss://', 'unix://' or "
            f"'redis+sentinel://' URL (WAIT confirms the writes of one connection to one "
            f"master's replicas: on Redis Cluster it is per node, the embedded store has "
            f"no replicas), got {_redact(url)!r}"
        )
    replicas = _int_param(params, "wait", None, 1, 16, "a number of replicas")
    timeout_ms = _int_param(
        params, "wait_timeout", REPLICA_WAIT_TIMEOUT_MS, 1, MAX_WAIT_TIMEOUT_MS, "milliseconds"
    )
    return Durability(replicas, timeout_ms)


def _int_param(
    params: dict[str, str], name: str, default: int | None, low: int, high: int, what: str
) -> int:
    raw = params.get(name)
    if raw is None and default is not None:
        return default
    if raw is None or not raw.isdigit() or not low <= int(raw) <= high:
        raise UsageError(
            f"expected '{name}' to be {what} from {low} to {high} in the store URL, got {raw!r}"
        )
    return int(raw)


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The sentinels, service, db and credentials of a ``redis+sentinel://`` URL."""
    parts = urlsplit(url)
    if not url.startswith(SENTINEL_SCHEME) or parts.fragment:
        raise UsageError(f"expected {SENTINEL_FORM}, got {_redact(url)!r}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    sentinels = []
    for item in hosts.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep:
            host, port = item.strip(), str(SENTINEL_PORT)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(
                f"expected {SENTINEL_FORM}: each sentinel as host or host:port, "
                f"got {item!r} in {_redact(url)!r}"
            )
        sentinels.append((host, int(port)))
    path = [unquote(p) for p in parts.path.split("/")[1:]]
    if not path or not path[0] or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise UsageError(
            f"expected {SENTINEL_FORM}: the master's service name (as in 'sentinel "
            f"monitor <service> ...'), then an optional db number, got {_redact(url)!r}"
        )
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(params) - {*_DURABILITY_PARAMS, "sentinel_password"})
    if unknown:
        raise UsageError(
            f"expected only 'wait', 'wait_timeout' and 'sentinel_password' as parameters of "
            f"a redis+sentinel:// URL, got {', '.join(map(repr, unknown))}"
        )
    return SentinelTarget(
        sentinels=tuple(sentinels),
        service=path[0],
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(username) or None,
        password=unquote(password) or None,
        sentinel_password=params.get("sentinel_password") or None,
    )


def _redact(url: str) -> str:
    """``url`` without its password (an error message may be logged)."""
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return urlunsplit(parts._replace(netloc=f"{userinfo.partition(':')[0]}:***@{hosts}"))


def _without_durability(url: str) -> str:
    """``url`` without the parameters Parley reads itself (redis-py would refuse them)."""
    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    if not any(name in _DURABILITY_PARAMS for name, _ in params):
        return url
    kept = [(name, value) for name, value in params if name not in _DURABILITY_PARAMS]
    return urlunsplit(parts._replace(query=urlencode(kept)))


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


class _BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """The master's pool, found through the sentinels, blocking like the single-server
    pool: under a burst, callers wait for a connection instead of failing."""


class _SentinelRedis(aioredis.Redis):
    """The master's client; closing it closes the connections to the sentinels too."""

    sentinel_manager: Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        if self.sentinel_manager is not None:
            await self.sentinel_manager.aclose()


def _sentinel(url: str) -> aioredis.Redis:
    # The master's address is asked of the sentinels on every new connection. Errors while
    # they fail over are redis-py ConnectionErrors — the old master refusing connections,
    # MasterNotFoundError while none is elected, "the previous master is now a slave" for
    # a READONLY reply of a demoted one — so every caller sees StoreUnavailable and retries
    # as through any outage; no write is acknowledged by a node that is not the master.
    target = parse_sentinel_url(url)
    timeouts = {"socket_timeout": SOCKET_TIMEOUT_SECONDS, "socket_connect_timeout": 1.0}
    # (the master named with the newest configuration, not the first sentinel's answer)
    sentinel = NewestMasterSentinel(  # type: ignore[no-untyped-call,unused-ignore]
        list(target.sentinels),
        sentinel_kwargs={**timeouts, "password": target.sentinel_password},
    )
    client = sentinel.master_for(
        target.service,
        redis_class=_SentinelRedis,
        connection_pool_class=_BlockingSentinelPool,
        db=target.db,
        username=target.username,
        password=target.password,
        max_connections=POOL_MAX_CONNECTIONS,
        timeout=POOL_WAIT_SECONDS,
        health_check_interval=HEALTH_CHECK_SECONDS,
        socket_keepalive=True,
        **timeouts,
    )
    client.sentinel_manager = sentinel
    return cast(aioredis.Redis, client)


def connect(url: str) -> aioredis.Redis:
    durability_of(url)  # a bad URL stops here, before any connection
    if is_cluster_url(url):
        return _cluster(url)
    if url.startswith(SENTINEL_SCHEME):
        return _sentinel(url)
    if url.startswith(MEMORY_SCHEME):
        return embedded_client(url[len(MEMORY_SCHEME) :] or "default")
    if url.startswith(SINGLE_SCHEMES):
        # A blocking pool: under a burst, callers wait for a connection instead of failing.
        # (TCP keepalive is a TCP option: a unix socket's connection takes none.)
        tcp = {} if url.startswith("unix://") else {"socket_keepalive": True}
        pool = aioredis.BlockingConnectionPool.from_url(
            _without_durability(url),
            max_connections=POOL_MAX_CONNECTIONS,
            timeout=POOL_WAIT_SECONDS,
            health_check_interval=HEALTH_CHECK_SECONDS,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            **tcp,
        )
        return aioredis.Redis(connection_pool=pool)
    raise UsageError(
        f"expected a Redis URL 'redis://host:port[/db]', 'rediss://...', 'unix://...', "
        f"'redis+cluster://host:port,...', {SENTINEL_FORM} or 'memory://[name]', got "
        f"{_redact(url)!r}"
    )

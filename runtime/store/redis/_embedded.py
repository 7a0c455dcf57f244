"""The embedded store (``memory://[name]``): an in-process fakeredis server per name,
shared by every store of the process that names it, and the connections to it.

fakeredis is imported on first use: a deployment on Redis does not load it.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

_servers: dict[str, Any] = {}


def embedded_client(name: str) -> aioredis.Redis:
    import fakeredis

    server = _servers.get(name)
    if server is None:
        server = _servers[name] = fakeredis.FakeServer()
    client: aioredis.Redis = fakeredis.FakeAsyncRedis(
        server=server, connection_class=_connection_class()
    )
    return client


_connection: type[Any] | None = None


def _connection_class() -> type[Any]:
    global _connection
    if _connection is None:
        import fakeredis
        from fakeredis.aioredis import FakeAsyncRedisConnection

        class EmbeddedConnection(FakeAsyncRedisConnection):
            """A connection whose end also ends the blocking command it left waiting, as
            Redis does when a client goes away. fakeredis serves that command until its
            own timeout instead. Race closed: a worker stopped during its blocking read of
            tasks (the read cancelled, its connection dropped); the next task of the
            partition, delivered to that read within its block time, sat in the pending
            list of a consumer nobody reads for, and its run waited for the visibility
            timeout (its later answers queue no task of their own)."""

            async def disconnect(  # type: ignore[override]
                self, nowait: bool = False, **kwargs: Any
            ) -> None:
                socket = self._sock
                if socket is not None and socket._blocked:
                    # CLIENT UNBLOCK from another connection (this one is going), by the
                    # id CLIENT ID would have given, which a blocked connection cannot ask
                    other = fakeredis.FakeRedis(server=self._server)
                    other.client_unblock(int(socket._client_info["id"]))
                    other.close()
                await super().disconnect(nowait=nowait, **kwargs)

        _connection = EmbeddedConnection
    return _connection

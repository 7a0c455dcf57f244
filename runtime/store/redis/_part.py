"""What the parts of :class:`~runtime.store.redis.RedisStore` (executions, sessions,
inspection) share: the connection, the scripts, the clock and run keys it provides."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

from . import _keys


class StorePart:
    """A part of the Redis store; ``RedisStore`` provides what is declared here."""

    partitions: int
    is_cluster: bool

    @property
    def client(self) -> aioredis.Redis:  # pragma: no cover - RedisStore provides it
        raise NotImplementedError

    @property
    def scripts(self) -> Any:  # pragma: no cover - RedisStore provides it
        raise NotImplementedError

    async def now_ms(self) -> int:  # pragma: no cover - RedisStore provides it
        raise NotImplementedError

    # Redis' clock now without a round trip, if its last reading is recent enough; else
    # None (then ``await now_ms()``). On every claim and write: no coroutine. (RedisStore
    # sets it to its clock's own method: no call more.)
    fresh_ms: Callable[[], int | None]

    async def _ensure_groups(self) -> None:  # pragma: no cover - RedisStore provides it
        raise NotImplementedError

    def _run(self, run_id: str) -> _keys.RunKeys:
        return _keys.run_keys(run_id, self.partitions)

"""One translation of redis-py's connection failures into Parley's error: the batcher uses
it for every script call, ``store_call`` for the store's other methods."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...errors import StoreUnavailable

P = ParamSpec("P")
R = TypeVar("R")
# (InvalidResponse: what answered is not speaking Redis' protocol: a URL naming another
# server's port, or a connection corrupted on the way; a traceback before)
OUTAGE = (RedisConnectionError, RedisTimeoutError, InvalidResponse, OSError)


def unavailable(exc: BaseException) -> StoreUnavailable:
    error = StoreUnavailable(f"the store (Redis) is unavailable: {exc}")
    error.__cause__ = exc
    return error


def store_call(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """Report an unreachable Redis as :class:`StoreUnavailable` (nothing is known to have
    changed; the caller may retry), whatever redis-py raised."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except OUTAGE as exc:
            raise unavailable(exc) from exc

    return call

"""Abuse limits for anonymous clients: how many sessions one client IP may create and how
many chat messages (each starts a run: an LLM execution in a real deployment) it may send.

Counted by the ``limits`` library (sliding-window counters) in the store's own Redis, so a
limit holds across every server process of a deployment and uses Redis' clock (key
expiry), not each process's. The embedded store (``memory://``) counts in the process.

The client is the TCP peer (``scope["client"]``); behind a proxy, ``parley server`` lets
uvicorn replace it with the ``X-Forwarded-For`` client only for the proxies listed in
``PARLEY_TRUSTED_PROXIES`` (trusting it from anyone would let a client pick its own IP).
IPv6 clients are counted per /64, the block one subscriber usually holds.

A refused request is refused before anything is recorded: 429 with ``Retry-After`` over
HTTP, an error frame ``rate_limited`` (with ``retry_after``) on the websocket.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItem, parse_many
from limits.aio.storage import (
    MemoryStorage,
    RedisClusterStorage,
    RedisSentinelStorage,
    RedisStorage,
    Storage,
)
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError

from runtime import StoreUnavailable

from .errors import ApiError

# The counters' keys in Redis: "<prefix>/<kind>/<client>/<amount>/<window>"; they expire
# by themselves (twice their window).
KEY_PREFIX = "parley:limits"
OFF = ("", "off", "none", "0")


class RateLimited(ApiError):
    """A client went over one of its rates; ``retry_after`` whole seconds until it may try
    again."""

    def __init__(self, what: str, rate: str, retry_after: int) -> None:
        super().__init__(
            429,
            "rate_limited",
            f"too many {what} from this address (at most {rate}); retry in {retry_after}s",
            headers={"Retry-After": str(retry_after)},
        )
        self.retry_after = retry_after


def parse_rate(rate: str, setting: str) -> list[RateLimitItem]:
    """The limits of a rate string (``"30/minute"``, ``"5/second;100/hour"``); none for
    ``off``. A malformed rate is a ValueError naming the setting (the server refuses to
    start rather than run without the limit)."""
    if rate.strip().lower() in OFF:
        return []
    try:
        return parse_many(rate)
    except ValueError as exc:
        raise ValueError(
            f"{setting}: expected a rate like '30/minute' or '5/second;100/hour', or 'off'; "
            f"got {rate!r} ({exc})"
        ) from None


def check_trusted_proxies(entries: Sequence[str], setting: str) -> None:
    """Each entry an IP, a network without host bits (``10.0.0.0/8``) or ``*``: uvicorn
    takes any other string as a literal no peer ever matches, so a typo would silently
    ignore every proxy's ``X-Forwarded-For``. A ValueError naming the setting and entry."""
    for entry in entries:
        if entry == "*":
            continue
        try:
            ipaddress.ip_network(entry, strict=True)
        except ValueError as exc:
            raise ValueError(
                f"{setting}: {entry!r} is not an IP, a network like '10.0.0.0/8', or '*' ({exc})"
            ) from None


def storage_for(store_url: str) -> Storage:
    """A ``limits`` storage in the same Redis as the store at ``store_url``."""
    scheme, sep, rest = store_url.partition("://")
    if scheme == "memory":
        return MemoryStorage()
    options: dict[str, Any] = {
        "implementation": "redispy",
        "key_prefix": KEY_PREFIX,
        "wrap_exceptions": True,
    }
    if scheme in ("redis", "rediss"):
        return RedisStorage(f"async+{store_url}", **options)
    if scheme == "unix":
        return RedisStorage(f"async+redis+unix://{rest}", **options)
    if scheme == "redis+cluster":
        return RedisClusterStorage(f"async+redis+cluster://{rest}", **options)
    if scheme == "redis+sentinel":
        return RedisSentinelStorage(f"async+redis+sentinel://{rest}", **options)
    raise ValueError(f"no rate-limit storage for the store URL scheme {scheme + sep!r}")


def client_key(scope_client: Any) -> str:
    """Who a request is counted against: its client's address (IPv6: its /64)."""
    host = scope_client[0] if scope_client else "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return str(host)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # ::ffff:a.b.c.d is the IPv4 client a.b.c.d
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


@dataclass(frozen=True, slots=True)
class Rate:
    kind: str  # part of the counter's key
    what: str  # in the refusal's message
    setting: str
    text: str
    items: tuple[RateLimitItem, ...]


class AbuseLimits:
    """The per-client rates of one server process (every process counts in one store)."""

    def __init__(self, store_url: str, *, session_rate: str, message_rate: str) -> None:
        self.sessions = _rate("sessions", "new sessions", "PARLEY_SESSION_RATE", session_rate)
        self.messages = _rate("messages", "chat messages", "PARLEY_MESSAGE_RATE", message_rate)
        self.storage = storage_for(store_url)
        self.limiter = SlidingWindowCounterRateLimiter(self.storage)

    async def hit(self, rate: Rate, scope_client: Any) -> None:
        """Count one request of this client, or raise :class:`RateLimited` (counting
        nothing) when it is over any limit of ``rate``."""
        who = client_key(scope_client)
        try:
            over = await self._refusing(rate, who)
            if not over:
                over = await self._hit_all(rate, who)
            if over:
                waits = [await self._wait(item, rate.kind, who) for item in over]
                raise RateLimited(rate.what, rate.text, max(waits))
        except StorageError as exc:
            raise StoreUnavailable(f"rate limits: {exc.storage_error}") from None

    async def _refusing(self, rate: Rate, who: str) -> list[RateLimitItem]:
        """The limits of ``rate`` this request would go over, counting nothing. Every one
        is tested before any is hit: hitting them in turn, a burst refused per second
        would use up the hourly quota with requests it never served. One limit alone is
        not tested: its hit is atomic and counts nothing when it refuses."""
        if len(rate.items) == 1:
            return []
        return [item for item in rate.items if not await self.limiter.test(item, rate.kind, who)]

    async def _hit_all(self, rate: Rate, who: str) -> list[RateLimitItem]:
        """Count the request against every limit; the one that refused, if any.

        ``limits`` (5.x) has no atomic test-and-hit of several limits, so two requests of
        one client can both pass :meth:`_refusing` and race for the last place: the hit
        that loses is refused as over that limit, and the limits hit before it keep its
        count. Chosen over admitting it (a limit would be exceeded) and over taking the
        count back (a sliding window's hit cannot be undone once its window moved on): the
        race only arises between the client's own concurrent requests, errs toward
        refusing, and miscounts by at most those requests."""
        for item in rate.items:
            if not await self.limiter.hit(item, rate.kind, who):
                return [item]
        return []

    async def _wait(self, item: RateLimitItem, kind: str, who: str) -> int:
        """Whole seconds until ``item`` lets this client in again."""
        stats = await self.limiter.get_window_stats(item, kind, who)
        wait = max(1, math.ceil(stats.reset_time - time.time()))
        return min(wait, item.get_expiry())

    async def close(self) -> None:
        # limits has no close(); its redis-py client is its bridge's ``storage``.
        client = getattr(getattr(self.storage, "bridge", None), "storage", None)
        close = getattr(client, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()


def _rate(kind: str, what: str, setting: str, text: str) -> Rate:
    return Rate(kind, what, setting, text, tuple(parse_rate(text, setting)))

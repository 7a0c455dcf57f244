"""Riding out a store outage in a background loop."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("parley.worker")


def grow(delay: float, cap: float) -> float:
    """The next wait of an exponential backoff: 50 ms first, then doubling, up to ``cap``."""
    return min(max(delay * 2, 0.05), cap)


class Backoff:
    """Exponential backoff for a loop while the store is unreachable; logs the outage once."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.delay = 0.0

    async def wait(self, exc: BaseException) -> None:
        if self.delay == 0.0:
            log.error("%s: store unavailable (%s); retrying with backoff", self.what, exc)
        self.delay = grow(self.delay, 2.0)
        await asyncio.sleep(self.delay)

    def reset(self) -> bool:
        """The store answered; True when that ends an outage."""
        recovered = self.delay != 0.0
        if recovered:
            log.warning("%s: store reachable again", self.what)
        self.delay = 0.0
        return recovered

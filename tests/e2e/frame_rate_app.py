"""Imported by a test stack's server process (``--app``): each websocket's frame rate
lowered to ``PARLEY_TEST_WS_RATE`` frames per second, in bursts of at most
``PARLEY_TEST_WS_BURST`` (``ServerConfig.ws_rate`` and ``ws_burst``, which the command line
does not set). The server's own token bucket (``server.ws.RateLimiter``), only slower."""

from __future__ import annotations

import os

from server import ws

RATE = float(os.environ.get("PARLEY_TEST_WS_RATE", "10"))
BURST = int(os.environ.get("PARLEY_TEST_WS_BURST", "20"))


class LowRate(ws.RateLimiter):
    def __init__(self, rate: float, burst: int) -> None:
        super().__init__(RATE, BURST)


ws.RateLimiter = LowRate  # type: ignore[misc]

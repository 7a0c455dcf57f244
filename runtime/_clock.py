"""The wall clock Parley's timestamps and deadlines are taken from (milliseconds)."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)

"""Named crash points, for fault-injection tests.

A test starts a worker process with ``PARLEY_CRASH_AT=<point>`` (the points are
``runtime.testing.CRASH_POINTS``), optionally ``<point>@<n>`` to crash on the n-th time the
point is reached (default the first); the process then kills itself with SIGKILL exactly
there: no cleanup, no flush, like a power cut. Unset (the normal case) a crash point costs
one set lookup.
"""

from __future__ import annotations

import os
import signal

from .settings import crash_points_spec

POINTS = frozenset(
    {
        "after_step_start",
        "after_checkpoint_save",
        "after_hook_created",
        "after_on_created",
        "before_step_reexecute",
        "after_step_completed",
        "after_final_event",
        "after_child_started",
    }
)


def _parse(spec: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, nth = part.partition("@")
        if name not in POINTS:
            raise ValueError(f"unknown crash point {name!r}; expected one of {sorted(POINTS)}")
        armed[name] = int(nth) if nth else 1
    return armed


_armed = _parse(crash_points_spec())


def crash_point(name: str) -> None:
    if name in _armed:
        _armed[name] -= 1
        if _armed[name] <= 0:
            os.kill(os.getpid(), signal.SIGKILL)

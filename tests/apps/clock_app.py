"""A workflow for the clock-skew tests: a step long enough to need its lease renewed, whose
executions are counted in Redis (``test:slow:<run_id>``)."""

from __future__ import annotations

import asyncio

from runtime import step, workflow
from tests.apps.hitl_app import count


@step
async def slow(seconds: float) -> str:
    await count("slow")
    await asyncio.sleep(seconds)
    return "done"


@workflow(name="clock_slow")
async def clock_slow(seconds: float) -> str:
    return await slow(seconds)

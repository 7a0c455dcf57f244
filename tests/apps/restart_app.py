"""A workflow for the empty-Redis tests: a step and no client of its own (a step's own
Redis connection would see the restart too: that is the application's business)."""

from __future__ import annotations

from runtime import step, workflow


@step
async def echo(value: str) -> str:
    return value


@workflow(name="restart_echo")
async def restart_echo(value: str) -> str:
    return await echo(value)

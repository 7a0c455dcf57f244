"""Workflows with parallel waits, for the worker-process tests."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime import step, step_hook, workflow


@step
async def ask(name: str) -> Any:
    return await step_hook(name)


@workflow(name="parallel_asks_proc")
async def parallel_asks_proc() -> list[Any]:
    return list(await asyncio.gather(ask("legal"), ask("finance")))

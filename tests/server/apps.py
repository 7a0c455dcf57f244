"""Workflows the server tests start (registered on import)."""

from __future__ import annotations

from typing import Any

from runtime import STEP_HOOK_TIMEOUT, step, step_hook, workflow

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "note": {"type": "string"}},
    "required": ["ok"],
    "additionalProperties": False,
}


@workflow(name="srv_echo")
async def srv_echo(value: Any, *, twice: bool = False) -> Any:
    return [value, value] if twice else value


@step(name="approve")
async def approve_step(timeout: float | None) -> Any:
    answer = await step_hook(
        "approval",
        timeout=timeout,
        schema=APPROVAL_SCHEMA,
        on_timeout="return",
        prompt="Approve the refund?",
    )
    return "timed out" if answer is STEP_HOOK_TIMEOUT else answer


@workflow(name="srv_approval")
async def srv_approval(timeout: float | None = None) -> Any:
    return await approve_step(timeout)

"""The workflow of the Sentinel failover test: its state lives only in the store under
test (no side counters), so what the test checks is what survived the failover."""

from __future__ import annotations

from typing import Any

from runtime import save_step_checkpoint, step, step_hook, workflow


@step
async def ask(n: int) -> dict[str, Any]:
    await save_step_checkpoint({"asked": n}, defer=True)
    answer = await step_hook("answer", timeout=600, prompt=f"question {n}?")
    return {"n": n, "answer": answer}


@workflow(name="failover")
async def failover(n: int) -> dict[str, Any]:
    return await ask(n)

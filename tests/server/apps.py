"""Workflows the server tests start (registered on import)."""

from __future__ import annotations

from typing import Any

from runtime import STEP_HOOK_TIMEOUT, first, hook, hook_url, step, step_hook, workflow

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


# The links hook_url made in on_created, by token (the worker runs in the test's process).
LINKS: dict[str, str] = {}


def _send_link(token: str) -> None:
    LINKS[token] = hook_url(token, who="alice@example.org")


@step(name="approve_by_link")
async def approve_by_link_step(timeout: float | None) -> Any:
    return await step_hook(
        "approval",
        timeout=timeout,
        schema=APPROVAL_SCHEMA,
        on_created=_send_link,
        prompt="Approve the refund?",
    )


@workflow(name="srv_link_approval")
async def srv_link_approval(timeout: float | None = None) -> Any:
    return await approve_by_link_step(timeout)


@step(name="free_answer")
async def free_answer_step() -> Any:
    return await step_hook("anything", prompt="Say anything")  # no schema


@workflow(name="srv_free")
async def srv_free() -> Any:
    """A hook that takes any answer: only the payload limits stand guard."""
    return await free_answer_step()


@workflow(name="srv_either")
async def srv_either() -> Any:
    """Two hooks, the first answered wins: the other is withdrawn."""
    return await first(hook("yes", prompt="Yes?"), hook("no", prompt="No?"))


@step(name="review_document")
async def review_document_step(document: str) -> Any:
    return await step_hook("review", prompt=f"Review this document:\n\n{document}")


@workflow(name="srv_review")
async def srv_review(document: str) -> Any:
    """A hook whose prompt is as long as the document under review (tens of KB)."""
    return await review_document_step(document)


# Under the payload limit (64 KiB) as a result; as the next run's input with a message of a
# few thousand characters beside it, over it.
BIG_MEMORY = "m" * 62_000


@workflow(name="srv_big_memory")
async def srv_big_memory(text: str, memory: Any = None) -> Any:
    """A chat workflow that remembers nearly as much as a run's input may hold."""
    return {"reply": f"got {len(text)} characters", "memory": BIG_MEMORY}

"""Turning raw Redis replies into the runtime's models and errors."""

from __future__ import annotations

from typing import Any

from ._codec import loads
from ._keys import make_token
from .errors import (
    EventLimitExceeded,
    HookAlreadyAnswered,
    HookCancelled,
    HookExpired,
    HookNotFound,
    RunFinished,
    RunNotFound,
)
from .models import HOOK_STATUS_BY_CODE, HookInfo, RunInfo, RunStatus


def opt_text(value: bytes | None) -> str | None:
    return value.decode() if value else None


def resume_error(outcome: str, reply: list[Any], run_id: str, hook_id: str) -> Exception:
    ids = {"run_id": run_id, "hook_id": hook_id}
    if outcome == "no_run":
        return RunNotFound(f"no run {run_id!r}", run_id=run_id)
    if outcome == "no_hook":
        return HookNotFound(f"run has no hook {hook_id!r}", **ids)
    if outcome == "conflict":
        return HookAlreadyAnswered("a different answer was already accepted", **ids)
    if outcome == "expired":
        return HookExpired("the hook expired before this answer", **ids)
    if outcome == "cancelled":
        return HookCancelled("the run was cancelled; the hook no longer takes answers", **ids)
    if outcome == "finished":
        return RunFinished(f"run already {reply[1].decode()}", **ids)
    if outcome == "limit":
        return EventLimitExceeded("the run reached its maximum number of events", **ids)
    raise AssertionError(f"unexpected resume outcome {outcome!r}")


def hook_info(run_id: str, hook_id: str, value: bytes, session: str | None) -> HookInfo:
    meta = loads(value[2:])
    expires = meta.get("expires_at")
    return HookInfo(
        token=make_token(run_id, hook_id),
        run_id=run_id,
        hook_id=hook_id,
        name=meta["name"],
        status=HOOK_STATUS_BY_CODE[value[:1].decode()],
        step_id=meta.get("step_id"),
        expires_at=None if expires is None else expires / 1000,
        session=session,
        prompt=meta.get("prompt"),
        schema=meta.get("schema"),
    )


def hook_infos(run_id: str, hooks: dict[bytes, bytes], session: str | None) -> list[HookInfo]:
    return [
        hook_info(run_id, field.decode(), value, session)
        for field, value in sorted(hooks.items())
        if b"!" not in field
    ]


def run_info(run_id: str, run: dict[bytes, bytes], hooks: dict[bytes, bytes]) -> RunInfo:
    status = RunStatus(run[b"status"].decode())
    out = run.get(b"out")
    session = opt_text(run.get(b"session"))
    created = run.get(b"created")
    return RunInfo(
        run_id=run_id,
        workflow=run[b"wf"].decode(),
        status=status,
        result=loads(out) if out and status is RunStatus.COMPLETED else None,
        error=loads(out) if out and status is RunStatus.FAILED else None,
        session=session,
        created_at=int(created) / 1000 if created else None,
        hooks=hook_infos(run_id, hooks, session),
    )

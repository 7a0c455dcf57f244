"""Parley: a durable workflow runtime for conversations between AI agents and people."""

from __future__ import annotations

from .errors import (
    EventLimitExceeded,
    HookAlreadyAnswered,
    HookCancelled,
    HookExpired,
    HookNotFound,
    HookTimeout,
    InvalidPayload,
    InvalidToken,
    LeaseLost,
    ParleyError,
    PayloadTooLarge,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunNotFound,
    StepFailed,
    UsageError,
    WaitTimeout,
    WorkflowNotFound,
)
from .models import Event, HookInfo, HookStatus, RunInfo, RunStatus
from .primitives import (
    STEP_HOOK_TIMEOUT,
    delete_step_checkpoint,
    hook,
    load_step_checkpoint,
    save_step_checkpoint,
    sleep,
    step_hook,
)
from .registry import step, workflow
from .runtime import Limits, Runtime
from .worker import Worker

__all__ = [
    "STEP_HOOK_TIMEOUT",
    "Event",
    "EventLimitExceeded",
    "HookAlreadyAnswered",
    "HookCancelled",
    "HookExpired",
    "HookInfo",
    "HookNotFound",
    "HookStatus",
    "HookTimeout",
    "InvalidPayload",
    "InvalidToken",
    "LeaseLost",
    "Limits",
    "ParleyError",
    "PayloadTooLarge",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunInfo",
    "RunNotFound",
    "RunStatus",
    "Runtime",
    "StepFailed",
    "UsageError",
    "WaitTimeout",
    "Worker",
    "WorkflowNotFound",
    "delete_step_checkpoint",
    "hook",
    "load_step_checkpoint",
    "save_step_checkpoint",
    "sleep",
    "step",
    "step_hook",
    "workflow",
]

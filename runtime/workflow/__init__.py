"""The workflow API: the decorators and the durable primitives workflow code calls."""

from __future__ import annotations

from .decorators import step, workflow
from .links import hook_url
from .primitives import (
    STEP_HOOK_TIMEOUT,
    RunContext,
    current_run,
    delete_step_checkpoint,
    emit,
    hook,
    load_step_checkpoint,
    save_step_checkpoint,
    sleep,
    step_hook,
)

__all__ = [
    "STEP_HOOK_TIMEOUT",
    "RunContext",
    "current_run",
    "delete_step_checkpoint",
    "emit",
    "hook",
    "hook_url",
    "load_step_checkpoint",
    "save_step_checkpoint",
    "sleep",
    "step",
    "step_hook",
    "workflow",
]

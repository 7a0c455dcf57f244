"""The workflow API: the decorators and the durable primitives workflow code calls."""

from __future__ import annotations

from .decorators import step, workflow
from .determinism import now, patched, random, uuid4
from .links import hook_url
from .primitives import (
    STEP_HOOK_TIMEOUT,
    RunContext,
    child,
    continue_as_new,
    current_run,
    delete_step_checkpoint,
    emit,
    first,
    hook,
    load_step_checkpoint,
    receive,
    save_step_checkpoint,
    sleep,
    sleep_until,
    step_hook,
)
from .tagging import set_tags

__all__ = [
    "STEP_HOOK_TIMEOUT",
    "RunContext",
    "child",
    "continue_as_new",
    "current_run",
    "delete_step_checkpoint",
    "emit",
    "first",
    "hook",
    "hook_url",
    "load_step_checkpoint",
    "now",
    "patched",
    "random",
    "receive",
    "save_step_checkpoint",
    "set_tags",
    "sleep",
    "sleep_until",
    "step",
    "step_hook",
    "uuid4",
    "workflow",
]

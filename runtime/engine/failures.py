"""How a failure is written down: the error a failed step, child or run records in its
event, and the part of it a chat session's end user may see; and which errors are not the
step's failure at all (a store outage behind them)."""

from __future__ import annotations

import traceback
from typing import Any

from ..errors import ParleyError, outage

__all__ = ["MAX_TRACEBACK_CHARS", "describe_error", "outage", "public_error"]

MAX_TRACEBACK_CHARS = 8192


def describe_error(exc: BaseException, run_id: str | None = None) -> dict[str, Any]:
    """The error as events record it: type, message, code, and for an exception of the
    application's code (not Parley's own: a failed step or child, a timeout, a limit) its
    formatted traceback, the last ``MAX_TRACEBACK_CHARS`` characters of it. Recorded in
    the log of ``run_id``, a Parley error about that run does not name it again: the
    message said "(run=…)" once per level it went through (a step's failure, the run's,
    ``RunFailed``), up to three times."""
    code = getattr(exc, "code", None)
    message = str(exc)
    if isinstance(exc, ParleyError) and run_id is not None and exc.run_id == run_id:
        message = exc.message if exc.hook_id is None else f"{exc.message} (hook={exc.hook_id})"
    error: dict[str, Any] = {"type": type(exc).__name__, "message": message}
    if isinstance(code, str):
        error["code"] = code
    if not isinstance(exc, ParleyError) and exc.__traceback__:
        text = "".join(traceback.format_exception(exc)).rstrip("\n")
        if len(text) > MAX_TRACEBACK_CHARS:
            text = "…" + text[-(MAX_TRACEBACK_CHARS - 1) :]
        error["traceback"] = text
    return error


def public_error(error: dict[str, Any]) -> dict[str, Any]:
    """The error without its traceback (what a chat session's end user is sent)."""
    return {k: v for k, v in error.items() if k != "traceback"}

"""Errors as the HTTP API and the websocket gateway report them.

Every error is JSON ``{"error": <stable code>, "message": <what was expected, what came>}``.
A :class:`runtime.ParleyError` keeps its own ``code``; its HTTP status comes from
:data:`STATUS_BY_ERROR` (the most specific class wins: ``PayloadTooLarge`` is an
``InvalidPayload``, ``HookCancelled`` a ``HookExpired``).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from runtime import (
    EventLimitExceeded,
    HookAlreadyAnswered,
    HookExpired,
    HookNotFound,
    InvalidLink,
    InvalidPayload,
    InvalidToken,
    NondeterminismError,
    ParleyError,
    PayloadTooLarge,
    RunFinished,
    RunNotFound,
    StoreUnavailable,
    UsageError,
    WorkflowNotFound,
)

log = logging.getLogger("parley.server")


class ForbiddenHook(ParleyError):
    """A websocket of one session tried to answer a hook of another session's run."""

    code = "forbidden"


STATUS_BY_ERROR: dict[type[ParleyError], int] = {
    UsageError: 400,
    InvalidToken: 400,
    InvalidLink: 403,
    ForbiddenHook: 403,
    WorkflowNotFound: 404,
    RunNotFound: 404,
    HookNotFound: 404,
    HookAlreadyAnswered: 409,
    NondeterminismError: 409,
    EventLimitExceeded: 409,
    HookExpired: 410,  # and HookCancelled
    RunFinished: 410,
    InvalidPayload: 422,
    PayloadTooLarge: 413,
}


class ApiError(Exception):
    """An error of the server itself (authentication, malformed request, ...)."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def status_of(exc: ParleyError) -> int:
    for cls in type(exc).__mro__:
        status = STATUS_BY_ERROR.get(cls)
        if status is not None:
            return status
    return 500


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "message": message, **extra}


def parley_error_body(exc: ParleyError) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if exc.run_id is not None:
        extra["run_id"] = exc.run_id
    if exc.hook_id is not None:
        extra["hook_id"] = exc.hook_id
    return error_body(exc.code, exc.message, **extra)


async def handle_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(error_body(exc.code, exc.message), exc.status, headers=exc.headers)


async def handle_parley_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ParleyError)
    return JSONResponse(parley_error_body(exc), status_of(exc))


# What a client may do about a change the store may or may not have applied.
_UNKNOWN_OUTCOME = (
    "whether this request was applied is unknown (the store may have done it before the "
    "connection failed): send it again once the store is back — answers are idempotent, "
    "and a start sent again with the same Idempotency-Key header or run_id starts one run"
)


async def handle_store_unavailable(request: Request, exc: Exception) -> JSONResponse:
    # The store is down or restarting: say so (503, retry later) instead of a bare 500;
    # the store reconnects by itself once it is back. A write whose connection failed may
    # have been applied all the same: the reply says "unknown", never "not done".
    log.error("store unavailable while serving %s %s: %s", request.method, request.url.path, exc)
    if request.method in ("GET", "HEAD", "OPTIONS"):
        body = error_body("store_unavailable", f"{exc}; retry later")
    else:
        body = error_body("store_unavailable", f"{exc}; {_UNKNOWN_OUTCOME}", outcome="unknown")
    return JSONResponse(body, 503, headers={"Retry-After": "1"})


EXCEPTION_HANDLERS = {
    ApiError: handle_api_error,
    StoreUnavailable: handle_store_unavailable,
    ParleyError: handle_parley_error,
}

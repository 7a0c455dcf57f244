"""The HTTP JSON API: runs, hooks, sessions, health.

Everything under ``/api`` except ``POST /api/sessions`` (the widget's) requires
``Authorization: Bearer <API key>`` of a scope that allows it (``server.auth``).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from runtime import HookStatus, Runtime, StoreUnavailable, UsageError

from .auth import ApiKey, Permission, authorize
from .context import ServerContext
from .errors import ApiError


def ctx_of(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.ctx
    return ctx


def require_api_key(request: Request, permission: Permission) -> ServerContext:
    """401 without a valid key, 403 when its scope does not allow ``permission``; the key
    is kept as ``request.state.api_key`` (see :func:`api_key_of`)."""
    ctx = ctx_of(request)
    request.state.api_key = authorize(
        ctx.keys, request.headers.get("authorization", ""), permission
    )
    return ctx


def api_key_of(request: Request) -> ApiKey:
    key: ApiKey = request.state.api_key
    return key


async def read_json(request: Request, *, limit: int, required: bool = True) -> Any:
    """The request's JSON body, read at most ``limit`` bytes far."""
    declared = request.headers.get("content-length") or ""
    # isascii: isdigit() alone takes "²", which int() refuses (a 500, not the 413)
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise ApiError(
            413, "request_too_large", f"the body may be at most {limit} bytes, got {declared}"
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(
                413, "request_too_large", f"the body may be at most {limit} bytes, got more"
            )
    if not body:
        if required:
            raise ApiError(400, "malformed", "expected a JSON object body, got an empty body")
        return {}
    try:
        # integers read exactly: one beyond ±2**53 is refused by its value, never rounded
        return Runtime.decode(bytes(body))
    except ValueError as exc:
        raise ApiError(400, "malformed", f"expected a JSON body: {exc}") from None


def expect_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ApiError(400, "malformed", f"expected {what} to be a JSON object, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status, media_type="application/json")


async def healthz(request: Request) -> Response:
    ctx = ctx_of(request)
    try:
        await ctx.runtime.ping()
    except StoreUnavailable as exc:  # the store is down: report it, do not raise
        return JSONResponse({"status": "unavailable", "store": str(exc)}, 503)
    return JSONResponse({"status": "ok"})


async def start_run(request: Request) -> Response:
    ctx = require_api_key(request, Permission.START)
    body = expect_object(await read_json(request, limit=ctx.config.max_body_bytes), "the body")
    unknown = sorted(set(body) - {"workflow", "args", "kwargs", "session", "run_id", "tags"})
    if unknown:
        raise ApiError(
            400,
            "malformed",
            f"unknown field(s) {', '.join(unknown)}; expected workflow, args, kwargs, session, "
            "run_id, tags",
        )
    workflow = body.get("workflow")
    args = body.get("args", [])
    kwargs = body.get("kwargs", {})
    session = body.get("session")
    if not isinstance(workflow, str) or not workflow:
        raise ApiError(400, "malformed", f"expected 'workflow' to be a name, got {_kind(workflow)}")
    if not isinstance(args, list):
        raise ApiError(400, "malformed", f"expected 'args' to be an array, got {_kind(args)}")
    kwargs = expect_object(kwargs, "'kwargs'")
    tags = expect_object(body.get("tags", {}), "'tags'")  # values checked by Runtime.start
    if {"session", "run_id", "idempotency_key", "tags"} & set(kwargs):
        # Runtime.start takes `session` itself: a workflow parameter of that name cannot
        # be passed through kwargs (it would be a TypeError, i.e. a 500).
        raise ApiError(
            400,
            "malformed",
            "'kwargs' may not contain 'session', 'run_id', 'idempotency_key' or 'tags' (the "
            "run's chat session, id and tags are the top-level 'session', 'run_id' and "
            "'tags' fields and the Idempotency-Key header)",
        )
    if session is not None:
        if not isinstance(session, str):
            raise ApiError(
                400, "malformed", f"expected 'session' to be a session id, got {_kind(session)}"
            )
        await ctx.sessions.require(session)
    # A client that retries a start (after a timeout or a 503) with the same key gets the
    # same run, started once.
    run_id = await ctx.runtime.start(
        workflow,
        *args,
        session=session,
        run_id=body.get("run_id"),
        idempotency_key=request.headers.get("idempotency-key"),
        tags=tags or None,
        **kwargs,
    )
    if session is not None:
        await ctx.sessions.bind(session, run_id)
    return _json({"run_id": run_id, "status": "pending", "session": session}, 201)


async def retry_run(request: Request) -> Response:
    ctx = require_api_key(request, Permission.RETRY)
    run_id = request.path_params["run_id"]
    await ctx.runtime.retry(run_id)
    return _json({"run_id": run_id, "status": "pending"})


async def get_run(request: Request) -> Response:
    ctx = require_api_key(request, Permission.READ)
    info = await ctx.runtime.get_run(request.path_params["run_id"])
    return _json(info.to_json())


async def run_events(request: Request) -> Response:
    ctx = require_api_key(request, Permission.READ)
    run_id = request.path_params["run_id"]
    events = await ctx.runtime.events(run_id)
    return _json({"run_id": run_id, "events": [e.to_json() for e in events]})


async def cancel_run(request: Request) -> Response:
    ctx = require_api_key(request, Permission.CANCEL)
    body = expect_object(
        await read_json(request, limit=ctx.config.max_body_bytes, required=False), "the body"
    )
    reason = body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ApiError(400, "malformed", f"expected 'reason' to be a string, got {_kind(reason)}")
    run_id = request.path_params["run_id"]
    await ctx.runtime.cancel(run_id, reason)
    return _json({"run_id": run_id, "status": "cancelled"})


async def list_hooks(request: Request) -> Response:
    ctx = require_api_key(request, Permission.READ)
    status = request.query_params.get("status", "pending")
    run_id = request.query_params.get("run_id")
    if status not in {s.value for s in HookStatus} | {"all"}:
        raise ApiError(
            400,
            "malformed",
            f"expected status pending, received, expired, cancelled or all, got {status!r}",
        )
    if run_id is None and status != "pending":
        raise UsageError("listing hooks of every run supports status=pending only; add run_id")
    tag = request.query_params.get("tag") or None  # key:value, from the run's tags
    hooks = await ctx.runtime.list_hooks(
        None if status == "all" else status, run_id=run_id, tag=tag
    )
    return _json({"hooks": [h.to_json() for h in hooks]})


async def answer_hook(request: Request) -> Response:
    ctx = require_api_key(request, Permission.ANSWER)
    body = expect_object(await read_json(request, limit=ctx.config.max_body_bytes), "the body")
    if "payload" not in body:
        raise ApiError(400, "malformed", 'expected a body {"payload": <answer>}, got no payload')
    token = request.path_params["token"]
    recorded = await ctx.sessions.answer(
        token, body["payload"], answered_by=api_key_of(request).answered_by
    )
    return _json({"token": token, "recorded": recorded, "duplicate": not recorded})


async def create_session(request: Request) -> Response:
    ctx = ctx_of(request)
    await ctx.abuse.hit(ctx.abuse.sessions, request.scope.get("client"))  # 429: nothing made
    session = await ctx.sessions.create()
    return _json({"session_id": session}, 201)


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/api/runs", start_run, methods=["POST"]),
    Route("/api/runs/{run_id}", get_run, methods=["GET"]),
    Route("/api/runs/{run_id}/events", run_events, methods=["GET"]),
    Route("/api/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
    Route("/api/runs/{run_id}/retry", retry_run, methods=["POST"]),
    Route("/api/hooks", list_hooks, methods=["GET"]),
    Route("/api/hooks/{token}", answer_hook, methods=["POST"]),
    Route("/api/sessions", create_session, methods=["POST"]),
]

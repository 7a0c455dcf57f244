"""The operator's web console (``/console``) and the API it reads.

The page (``widget/console/``: plain ES modules, no build step) signs in with an API key
kept in the tab's session storage and sends it as ``Authorization: Bearer``. Besides the
run and hook endpoints of :mod:`server.api` it uses:

| endpoint | scope | |
|---|---|---|
| ``GET /api/whoami`` | reader | the key's name, scope and permissions |
| ``GET /api/keys`` | admin | the configured keys (names and scopes, never secrets) |
| ``GET /api/runs?status&workflow&session&q&since&until&offset`` | reader | runs, paged |
| ``POST /api/runs/{id}/restart`` | admin | a new run continuing this one from a step |
| ``GET /api/live`` | reader | server-sent events: ``hooks`` (every pending hook) on each change |
| ``GET /api/stats/history`` | reader | store-wide counters sampled over the last hour |
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Route

from runtime import RunInfo, RunStatus
from runtime.tags import parse_tag

from .api import _json, api_key_of, ctx_of, expect_object, read_json, require_api_key
from .auth import Permission
from .errors import ApiError

MAX_PAGE = 200
KEEPALIVE_SECONDS = 15.0


async def console_page(request: Request) -> Response:
    ctx = ctx_of(request)
    return FileResponse(
        ctx.config.widget_dir / "console" / "index.html",
        media_type="text/html",
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


async def whoami(request: Request) -> Response:
    require_api_key(request, Permission.READ)
    return _json(api_key_of(request).to_json())


async def list_keys(request: Request) -> Response:
    ctx = require_api_key(request, Permission.MANAGE_KEYS)
    return _json({"keys": [k.to_json() for k in ctx.keys.keys]})


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    # isascii: isdigit() alone takes "²", which int() refuses (a 500), and other scripts'
    # digits, which int() reads as numbers
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise ApiError(
            400,
            "malformed",
            f"expected {name} as a whole number (digits 0-9) from {low} to {high}, got {raw!r:.40}",
        )
    return int(raw)


_UNIX_SECONDS_RE = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")


def _time_param(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    # (not float() alone: it takes "nan", "inf", "1_0" and other scripts' digits, and
    # filtered by them the page was a 200 of odd runs rather than the caller's mistake)
    if not _UNIX_SECONDS_RE.fullmatch(raw):
        raise ApiError(
            400,
            "malformed",
            f"expected {name} in unix seconds (digits 0-9, maybe a fraction), got {raw!r:.40}",
        )
    return float(raw)


def _tags(request: Request) -> list[tuple[str, str]]:
    """The ``tag=key:value`` filters (repeatable: a run must have all of them)."""
    return [parse_tag(raw) for raw in request.query_params.getlist("tag")]


def _matches(run: RunInfo, request: Request, since: float | None, until: float | None) -> bool:
    params = request.query_params
    if any(run.tags.get(key) != value for key, value in _tags(request)):
        return False
    if params.get("workflow") and run.workflow != params["workflow"]:
        return False
    if params.get("session") and run.session != params["session"]:
        return False
    if params.get("q") and params["q"].strip() not in run.run_id:
        return False
    created = run.created_at or 0.0
    if since is not None and created < since:
        return False
    return until is None or created <= until


async def list_runs(request: Request) -> Response:
    ctx = require_api_key(request, Permission.READ)
    status = request.query_params.get("status") or None
    if status is not None and status not in {s.value for s in RunStatus}:
        raise ApiError(
            400,
            "malformed",
            f"expected status one of {sorted(s.value for s in RunStatus)}, got {status!r:.40}",
        )
    offset = _int_param(request, "offset", 0, 0, 10**9)
    limit = _int_param(request, "limit", 50, 1, MAX_PAGE)
    since, until = _time_param(request, "since"), _time_param(request, "until")
    version = request.query_params.get("version") or None
    tags = _tags(request)
    total: int | None
    if tags:
        # From the first tag's index (not a scan). With no other filter, only the page
        # and one more run are read: the total is then unknown (None) when there is more.
        others = len(tags) > 1 or since is not None or until is not None
        others = others or any(request.query_params.get(n) for n in ("workflow", "session", "q"))
        window = None if others else offset + limit + 1
        listed = await ctx.runtime.list_runs(status, version=version, tag=tags[0], limit=window)
        runs = [r for r in listed if _matches(r, request, since, until)]
        total = None if window is not None and len(runs) == window else len(runs)
    else:
        listed = await ctx.runtime.list_runs(status, version=version)
        runs = [r for r in listed if _matches(r, request, since, until)]
        total = len(runs)
    page = runs[offset : offset + limit]
    more = offset + limit < len(runs)
    return _json(
        {
            "runs": [{k: v for k, v in r.to_json().items() if k != "hooks"} for r in page],
            "total": total,
            "offset": offset,
            "next_offset": offset + limit if more else None,
        }
    )


async def restart_run(request: Request) -> Response:
    """A new run that continues this one from a step (``{"from_step"}``; default: the
    step that failed or was cut short), keeping the results before it."""
    ctx = require_api_key(request, Permission.START)
    run_id = request.path_params["run_id"]
    body = expect_object(
        await read_json(request, limit=ctx.config.max_body_bytes, required=False), "the body"
    )
    from_step = body.get("from_step")
    if from_step is not None and not isinstance(from_step, str):
        raise ApiError(400, "malformed", "expected 'from_step' to be a step id or name")
    new_id = await ctx.runtime.restart(run_id, from_step)
    return _json({"run_id": new_id, "restarted_from": run_id, "status": "pending"}, 201)


async def _next_change(
    queue: asyncio.Queue[list[dict[str, Any]]], draining: asyncio.Event
) -> list[dict[str, Any]] | None:
    """The next list of pending hooks; None after ``KEEPALIVE_SECONDS`` without one, or
    once the server shuts down."""
    getting = asyncio.ensure_future(queue.get())
    stopping = asyncio.ensure_future(draining.wait())
    try:
        await asyncio.wait(
            {getting, stopping}, timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        stopping.cancel()
        if not getting.done():
            getting.cancel()  # (a get cancelled before it completed takes nothing)
    return getting.result() if getting.done() and not getting.cancelled() else None


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"


async def live(request: Request) -> Response:
    """Server-sent events: ``hooks`` with every pending hook, at once and on each change."""
    ctx = require_api_key(request, Permission.READ)
    queue = ctx.watcher.subscribe()

    async def stream() -> AsyncIterator[bytes]:
        try:
            yield b"retry: 1000\n\n"
            while not ctx.draining.is_set():
                hooks = await _next_change(queue, ctx.draining)
                if hooks is not None:
                    yield _sse("hooks", {"hooks": hooks})
                elif not ctx.draining.is_set():
                    yield b": keep-alive\n\n"
        finally:
            ctx.watcher.unsubscribe(queue)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def stats_history(request: Request) -> Response:
    ctx = require_api_key(request, Permission.READ)
    with contextlib.suppress(Exception):
        if not ctx.history.samples:
            await ctx.history.sample()
    return _json({"every": ctx.history.every, "samples": list(ctx.history.samples)})


CONSOLE_ROUTES = [
    Route("/console", console_page, methods=["GET"]),
    Route("/api/whoami", whoami, methods=["GET"]),
    Route("/api/keys", list_keys, methods=["GET"]),
    Route("/api/runs", list_runs, methods=["GET"]),
    Route("/api/runs/{run_id}/restart", restart_run, methods=["POST"]),
    Route("/api/live", live, methods=["GET"]),
    Route("/api/stats/history", stats_history, methods=["GET"]),
]

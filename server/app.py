"""The Starlette application: HTTP API, websocket gateway, the widget and the demo page."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from runtime import Runtime, Worker
from runtime.links import LinkSigner

from .api import ROUTES
from .auth import KeyRing, make_key
from .console import CONSOLE_ROUTES
from .context import ServerConfig, ServerContext
from .errors import EXCEPTION_HANDLERS
from .links import LINK_ROUTES
from .origins import CorsMiddleware
from .sessions import Sessions
from .tailer import OutboxTailer
from .ws import session_socket

log = logging.getLogger("parley.server")


def create_app(
    runtime: Runtime,
    api_key: str,
    *,
    chat_workflow: str | None = None,
    run_worker: bool = False,
    config: ServerConfig | None = None,
) -> Starlette:
    """The server app on ``runtime`` (connected and closed by the app's lifespan).

    ``run_worker`` also runs a :class:`runtime.Worker` in the server's event loop (the
    demo: one process). ``config`` overrides the limits; ``api_key`` and
    ``chat_workflow`` win over the ones it holds.
    """
    base = config or ServerConfig(api_key=api_key)
    cfg = dataclasses.replace(
        base,
        api_key=api_key,
        chat_workflow=chat_workflow if chat_workflow is not None else base.chat_workflow,
    )
    keys = KeyRing(
        [
            *([make_key("default", "admin", api_key, where="api_key")] if api_key else []),
            *cfg.api_keys,
        ]
    )
    if not keys:
        raise ValueError("create_app needs an API key: api_key or config.api_keys")
    tailer = OutboxTailer(runtime, block_ms=cfg.ws_block_ms, queue_size=cfg.ws_queue_size)
    ctx = ServerContext(runtime, cfg, Sessions(runtime), tailer, keys=keys)
    if cfg.link_keys:
        ctx.links = LinkSigner(cfg.link_keys)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with runtime:
            task: asyncio.Task[None] | None = None
            if run_worker:
                ctx.worker = Worker(runtime)
                task = asyncio.create_task(ctx.worker.run(), name="parley-worker")
                log.info("in-process worker %s started", ctx.worker.consumer)
            ctx.history.start()
            try:
                yield
            finally:
                await ctx.watcher.close()
                await ctx.history.close()
                await tailer.close()  # before the runtime's connections go
                await ctx.abuse.close()
                if ctx.worker is not None and task is not None:
                    ctx.worker.stop()  # its run() ends its loops even if a cancel is lost
                    await task

    async def metrics(request: Request) -> Response:
        # Prometheus exposition (unauthenticated, like /healthz: scrape it from inside
        # your network). With an in-process worker, its instruments are included.
        source = ctx.worker.metrics if ctx.worker is not None else ctx.metrics
        return Response(await source.render(runtime), media_type=CONTENT_TYPE_LATEST)

    async def index(request: Request) -> Response:
        return FileResponse(cfg.widget_dir / "demo.html", media_type="text/html")

    async def langchain_demo(request: Request) -> Response:
        return FileResponse(cfg.widget_dir / "demo-langchain.html", media_type="text/html")

    routes = [
        *ROUTES,
        *LINK_ROUTES,
        *CONSOLE_ROUTES,
        WebSocketRoute("/ws/sessions/{session_id}", session_socket),
        Route("/", index, methods=["GET"]),
        Route("/langchain", langchain_demo, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Mount("/widget", StaticFiles(directory=cfg.widget_dir), name="widget"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
        middleware=[Middleware(CorsMiddleware, policy=cfg.origins)],
    )
    app.state.ctx = ctx
    return app

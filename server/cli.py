"""``parley server``: serve the app with uvicorn (registered with the ``parley`` command
through the ``parley.commands`` entry point).

``parley server --app mod [--redis URL] [--host H] [--port P]`` serves the API, the
websocket gateway and the widget; workers run elsewhere (``parley worker``). It needs
``PARLEY_API_KEY``. A visitor's chat message starts ``$PARLEY_CHAT_WORKFLOW`` (and pages
may pick one of ``$PARLEY_CHAT_WORKFLOWS``). Each request must be sent whole within
``$PARLEY_REQUEST_TIMEOUT`` seconds (``server.slowloris``); ``X-Forwarded-For`` is
believed only from ``$PARLEY_TRUSTED_PROXIES``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import secrets
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn

from runtime import Runtime, tracing
from runtime.cli.ops import import_app_options
from runtime.errors import UsageError
from runtime.settings import Settings

from .abuse import check_trusted_proxies, parse_rate, storage_for
from .app import create_app
from .auth import KeyConfigError, keys_from_settings
from .context import ServerConfig
from .origins import OriginPolicy
from .slowloris import protocol_with_read_timeout

# uvicorn's exit status for a server that could not start.
STARTUP_FAILURE = 3
# How long a response may stay open once the shutdown began (see serve()).
GRACEFUL_SHUTDOWN_SECONDS = 8

WS_MAX_SIZE = 1024 * 1024  # protocol limit; the gateway answers frames > 64 KiB itself


@dataclass(frozen=True, slots=True)
class Serving:
    """What ``serve`` serves: the apps it imports, its chat workflows, its store."""

    apps: Sequence[str]
    chat_workflow: str | None
    chat_workflows: Sequence[str] = ()
    run_worker: bool = False  # a worker in the same process (the demo)
    default_url: str | None = None  # the store when neither --redis nor REDIS_URL is given
    name: str = "server"


def add_serving_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)


def register(sub: Any, add_common: Any) -> None:
    parser = sub.add_parser("server", help="serve the HTTP/websocket API and the widget")
    add_common(parser)
    parser.add_argument("--app", action="append", default=[], help="module defining the workflows")
    add_serving_options(parser)
    parser.set_defaults(handler=_server_command)


def _server_command(args: argparse.Namespace) -> int:
    try:  # here, not in serve(): the demo's apps are its own, given by no --app
        import_app_options(args.app)
    except UsageError as exc:
        print(f"parley server: {exc}", file=sys.stderr)
        return 2
    settings = Settings.from_env()
    return serve(
        args,
        Serving(
            apps=args.app,
            chat_workflow=settings.chat_workflow,
            chat_workflows=settings.chat_workflows,
        ),
    )


def serve(args: argparse.Namespace, serving: Serving) -> int:
    for module in serving.apps:
        importlib.import_module(module)
    settings = Settings.from_env()
    try:  # tracing asked for without the otel extra: said in a line, as the others are
        tracing.configure(settings)
    except UsageError as exc:
        print(f"parley {serving.name}: {exc}", file=sys.stderr)
        return 2
    api_key = settings.api_key
    try:
        more_keys = [k for k in keys_from_settings(settings) if k.name != "default"]
    except KeyConfigError as exc:
        print(f"parley {serving.name}: {exc}", file=sys.stderr)
        return 2
    if not api_key and not more_keys:
        if not serving.run_worker:
            print(
                f"parley {serving.name}: set PARLEY_API_KEY (the key the HTTP API requires as "
                "'Authorization: Bearer <key>'), or PARLEY_API_KEYS / PARLEY_API_KEYS_FILE",
                file=sys.stderr,
            )
            return 2
        api_key = secrets.token_urlsafe(24)
        print(f"parley {serving.name}: HTTP API key for this run: {api_key}", flush=True)
    url = args.redis or serving.default_url
    if url is None:
        print(f"parley {serving.name}: give --redis URL or set REDIS_URL", file=sys.stderr)
        return 2
    try:
        origins = OriginPolicy.from_list(settings.allowed_origins)
        parse_rate(settings.session_rate, "PARLEY_SESSION_RATE")
        parse_rate(settings.message_rate, "PARLEY_MESSAGE_RATE")
        check_trusted_proxies(settings.trusted_proxies, "PARLEY_TRUSTED_PROXIES")
        storage_for(url)
    except ValueError as exc:
        print(f"parley {serving.name}: {exc}", file=sys.stderr)
        return 2
    runtime = Runtime(url, partitions=args.partitions)
    config = ServerConfig(
        api_key=api_key,
        chat_workflow=serving.chat_workflow,
        chat_workflows=frozenset(serving.chat_workflows),
        api_keys=tuple(more_keys),
        link_keys=settings.link_keys,
        public_url=settings.public_url,
        origins=origins,
        session_rate=settings.session_rate,
        message_rate=settings.message_rate,
        ws_rate=settings.ws_rate,
        ws_burst=settings.ws_burst,
    )
    app = create_app(runtime, api_key, run_worker=serving.run_worker, config=config)
    print(
        f"parley {serving.name} on http://{args.host}:{args.port} (store {_redacted(url)}; "
        f"pages allowed: {origins.describe()})",
        flush=True,
    )
    uvicorn_config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=str(args.log_level).lower(),
        ws_max_size=WS_MAX_SIZE,
        lifespan="on",
        # X-Forwarded-For/-Proto only from the proxies listed (uvicorn's default trusts
        # 127.0.0.1: any local process could then pick its client address).
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=list(settings.trusted_proxies),
        http=protocol_with_read_timeout(settings.request_timeout),
        # A backstop: a response still open this long after the shutdown began (a client
        # that stopped reading a stream, a request stuck on the store) is cancelled, and
        # the lifespan's shutdown (the in-process worker's graceful stop) still runs before
        # the supervisor's SIGKILL (Docker's default is 10 s).
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    server = _DrainingServer(uvicorn_config, app.state.ctx.draining)
    with contextlib.suppress(KeyboardInterrupt):  # (Ctrl-C: as uvicorn.run, no traceback)
        server.run()
    # A server that never started (the store unreachable at startup, the port taken) fails,
    # so that a supervisor restarts it (uvicorn.run's exit status 3).
    return 0 if server.started else STARTUP_FAILURE


class _DrainingServer(uvicorn.Server):
    """uvicorn's server, which sets ``draining`` as its shutdown begins. Race closed:
    uvicorn waits for every open response to end before the app's lifespan hears of the
    shutdown, and the console's live stream never ends by itself: a server stopped with a
    console open waited until its supervisor killed it (requests in flight and the demo's
    in-process worker cut short)."""

    def __init__(self, config: uvicorn.Config, draining: asyncio.Event) -> None:
        super().__init__(config)
        self.draining = draining

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.draining.set()
        await super().shutdown(sockets)


def _redacted(url: str) -> str:
    """``url`` without its password (``redis://:secret@host`` → ``redis://:***@host``)."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{host}"

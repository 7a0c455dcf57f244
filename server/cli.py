"""``parley server`` and ``parley demo``: serve the app with uvicorn.

``parley server --app mod [--redis URL] [--host H] [--port P]`` serves the API, the
websocket gateway and the widget; workers run elsewhere (``parley worker``). It needs
``PARLEY_API_KEY``. ``parley demo`` serves the support-agent demo with a worker in the same
process, on the embedded ``memory://`` store unless ``--redis``/``REDIS_URL`` is given.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import secrets
import sys

import uvicorn

from runtime import Runtime
from runtime.registry import get_workflow

from .app import ServerConfig, create_app

log = logging.getLogger("parley.server")

DEMO_APP = "examples.support_agent"
DEMO_WORKFLOW = "support_agent"
LANGCHAIN_DEMO_APP = "examples.langchain_agent"
LANGCHAIN_DEMO_WORKFLOW = "langchain_agent"
WS_MAX_SIZE = 1024 * 1024  # protocol limit; the gateway answers frames > 64 KiB itself


def chat_workflow_for(apps: list[str]) -> str | None:
    """The workflow a visitor's message starts: ``$PARLEY_CHAT_WORKFLOW``, else the demo's
    is loaded."""
    name = os.environ.get("PARLEY_CHAT_WORKFLOW")
    if name:  # may be defined only in the workers (they announce their workflows)
        return name
    try:
        get_workflow(DEMO_WORKFLOW)
    except Exception:
        return None
    return DEMO_WORKFLOW


def _second_demo() -> list[str]:
    """The LangChain agent demo (/langchain), when the `parley[langchain]` extra is there."""
    try:
        importlib.import_module(LANGCHAIN_DEMO_APP)
    except ImportError as exc:
        log.info("the LangChain demo is off: %s", exc)
        return []
    return [LANGCHAIN_DEMO_WORKFLOW]


def _offered_from_environment() -> list[str]:
    """``$PARLEY_CHAT_WORKFLOWS``: more chat workflows pages may pick (comma-separated)."""
    names = os.environ.get("PARLEY_CHAT_WORKFLOWS", "")
    return [name.strip() for name in names.split(",") if name.strip()]


def serve(args: argparse.Namespace, demo: bool) -> int:
    apps: list[str] = list(getattr(args, "app", None) or [])
    if demo and DEMO_APP not in apps:
        apps.append(DEMO_APP)
    for module in apps:
        importlib.import_module(module)
    api_key = os.environ.get("PARLEY_API_KEY", "")
    if not api_key:
        if not demo:
            print(
                "parley server: set PARLEY_API_KEY (the key the HTTP API requires as "
                "'Authorization: Bearer <key>')",
                file=sys.stderr,
            )
            return 2
        api_key = secrets.token_urlsafe(24)
        print(f"parley demo: HTTP API key for this run: {api_key}", flush=True)
    url = args.redis or os.environ.get("REDIS_URL") or ("memory://demo" if demo else None)
    if url is None:
        print("parley server: give --redis URL or set REDIS_URL", file=sys.stderr)
        return 2
    runtime = Runtime(url, partitions=args.partitions)
    config = ServerConfig(
        api_key=api_key,
        chat_workflows=frozenset(
            [*(_second_demo() if demo else []), *_offered_from_environment()]
        ),
    )
    app = create_app(
        runtime, api_key, chat_workflow=chat_workflow_for(apps), run_worker=demo, config=config
    )
    print(f"parley {'demo' if demo else 'server'} on http://{args.host}:{args.port} "
          f"(store {url})", flush=True)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=str(args.log_level).lower(),
        ws_max_size=WS_MAX_SIZE,
        lifespan="on",
    )
    return 0

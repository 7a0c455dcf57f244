"""``parley demo``: the chat-agent demo, a server with a worker in one process
(registered with the ``parley`` command through the ``parley.commands`` entry point).

It serves the support-agent demo at ``/`` and, with the ``parley[langchain]`` extra, the
LangChain agent at ``/langchain``. Its store, unless ``--redis``/``REDIS_URL`` is given: a
private ``redis-server`` with its data in ``$PARLEY_DEMO_DATA_DIR`` (conversations survive
a restart), or, without that binary or with ``--volatile``, the embedded ``memory://``
store (said once, loudly: everything is lost when the demo stops).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

from runtime.settings import DemoSettings, Settings
from server.cli import Serving, add_serving_options, serve

from .demo_store import VOLATILE_WARNING, DemoStoreError, PrivateRedis

log = logging.getLogger("parley.demo")

DEMO_APP = "examples.support_agent"
DEMO_WORKFLOW = "support_agent"
LANGCHAIN_DEMO_APP = "examples.langchain_agent"
LANGCHAIN_DEMO_WORKFLOW = "langchain_agent"
VOLATILE_URL = "memory://demo"


def register(sub: Any, add_common: Any) -> None:
    parser = sub.add_parser(
        "demo", help="serve the chat-agent demo (server + worker in one process)"
    )
    add_common(parser)
    add_serving_options(parser)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the demo's private redis-server keeps its data "
        "(default: $PARLEY_DEMO_DATA_DIR or ~/.local/share/parley/demo)",
    )
    parser.add_argument(
        "--volatile",
        action="store_true",
        help="keep nothing: the embedded memory:// store, lost when the demo stops",
    )
    parser.set_defaults(handler=_demo_command)


def _langchain_demo() -> list[str]:
    """The LangChain agent demo (/langchain), when the `parley[langchain]` extra is there."""
    try:
        importlib.import_module(LANGCHAIN_DEMO_APP)
    except ImportError as exc:
        log.info("the LangChain demo is off: %s", exc)
        return []
    return [LANGCHAIN_DEMO_WORKFLOW]


def _demo_command(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    private: PrivateRedis | None = None
    if args.redis is None:
        binary = shutil.which("redis-server")
        if binary is None or args.volatile:
            reason = "--volatile" if args.volatile else VOLATILE_WARNING
            print(f"parley demo: {reason}", file=sys.stderr, flush=True)
            args.redis = VOLATILE_URL
        else:
            data_dir = (args.data_dir or DemoSettings.from_env().data_dir).expanduser().resolve()
            private = PrivateRedis(data_dir, binary)
            try:
                args.redis = private.start()
            except DemoStoreError as exc:
                print(f"parley demo: {exc}", file=sys.stderr)
                return 2
            print(
                f"parley demo: conversations are kept in {data_dir} (a private redis-server; "
                "--volatile to keep nothing)",
                flush=True,
            )
    try:
        return serve(
            args,
            Serving(
                apps=[DEMO_APP],
                chat_workflow=settings.chat_workflow or DEMO_WORKFLOW,
                chat_workflows=[*_langchain_demo(), *settings.chat_workflows],
                run_worker=True,
                default_url=VOLATILE_URL,
                name="demo",
            ),
        )
    finally:
        if private is not None:
            private.stop()

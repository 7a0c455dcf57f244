"""``parley demo``: the chat-agent demo, a server with a worker in one process
(registered with the ``parley`` command through the ``parley.commands`` entry point).

It serves the support-agent demo at ``/`` and, with the ``parley[langchain]`` extra, the
LangChain agent at ``/langchain``, on the embedded ``memory://`` store unless
``--redis``/``REDIS_URL`` is given.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from typing import Any

from runtime.settings import Settings
from server.cli import Serving, add_serving_options, serve

log = logging.getLogger("parley.demo")

DEMO_APP = "examples.support_agent"
DEMO_WORKFLOW = "support_agent"
LANGCHAIN_DEMO_APP = "examples.langchain_agent"
LANGCHAIN_DEMO_WORKFLOW = "langchain_agent"


def register(sub: Any, add_common: Any) -> None:
    parser = sub.add_parser(
        "demo", help="serve the chat-agent demo (server + worker in one process)"
    )
    add_common(parser)
    add_serving_options(parser)
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
    return serve(
        args,
        Serving(
            apps=[DEMO_APP],
            chat_workflow=settings.chat_workflow or DEMO_WORKFLOW,
            chat_workflows=[*_langchain_demo(), *settings.chat_workflows],
            run_worker=True,
            default_url="memory://demo",
            name="demo",
        ),
    )

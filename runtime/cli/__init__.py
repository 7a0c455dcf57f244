"""The ``parley`` command: ``parley worker``, ``parley runs ...``, ``parley hooks ...``,
and the commands other packages add through the ``parley.commands`` entry points
(``parley server`` from the server package, ``parley demo`` from the examples).

An entry point names a function ``register(subparsers, add_common)`` that adds its
subcommands, each with ``set_defaults(handler=...)``: the engine never imports the
packages above it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

from .. import logs
from ..settings import Settings
from . import ops, replay, worker

Handler = Callable[[argparse.Namespace], int]
ENTRY_POINT_GROUP = "parley.commands"


def add_common(parser: argparse.ArgumentParser) -> None:
    """The options every command has: the store, its partitions, the log level."""
    settings = Settings.from_env()
    parser.add_argument(
        "--redis",
        default=settings.redis_url,
        help="store URL (redis://host:port/db, redis+cluster://..., or memory:// for the "
        "embedded store); default: $REDIS_URL",
    )
    parser.add_argument("--partitions", type=int, default=settings.partitions)
    parser.add_argument("--log-level", default=settings.log_level)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="parley", description="Parley durable workflows")
    sub: Any = parser.add_subparsers(dest="command", required=True)
    worker.add_command(sub, add_common)
    ops.add_commands(sub, add_common)
    replay.add_command(sub, add_common)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        entry.load()(sub, add_common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level, Settings.from_env().log_format)
    handler: Handler = args.handler
    return handler(args)

"""The ``parley`` command: ``parley worker``, ``parley runs ...``, ``parley hooks ...``,
and the commands other packages add through the ``parley.commands`` entry points
(``parley server`` from the server package, ``parley demo`` from the examples).

An entry point names a function ``register(subparsers, add_common)`` that adds its
subcommands, each with ``set_defaults(handler=...)``: the engine never imports the
packages above it.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

from .. import logs
from ..settings import Settings, log_level
from . import ops, replay, worker

Handler = Callable[[argparse.Namespace], int]
ENTRY_POINT_GROUP = "parley.commands"


def add_common(parser: argparse.ArgumentParser) -> None:
    """The options every command has: the store, its partitions, the log level. Their
    defaults come from the environment in :func:`main`, once parsed: building the parser
    reads no setting, so ``--help`` works whatever the environment holds."""
    parser.add_argument(
        "--redis",
        default=None,
        help="store URL (redis://host:port/db, redis+cluster://..., or memory:// for the "
        "embedded store); default: $REDIS_URL",
    )
    parser.add_argument(
        "--partitions", type=int, default=None, help="default: $PARLEY_PARTITIONS, else 16"
    )
    parser.add_argument(
        "--log-level",
        type=_log_level,
        default=None,
        help="a logging level name (DEBUG, INFO, WARNING, ...); default: $PARLEY_LOG_LEVEL, "
        "else INFO",
    )


def _log_level(text: str) -> str:
    try:
        return log_level(text, "--log-level")
    except ValueError:
        # Not log_level's message: it names the option, and argparse names it before
        # ("argument --log-level: --log-level must be one of ...").
        known = ", ".join(logging.getLevelNamesMapping())
        raise argparse.ArgumentTypeError(
            f"expected one of {known} (any case), got {text!r}"
        ) from None


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
    try:  # once, before any command: a malformed variable is a line, not a traceback
        settings = Settings.from_env()
    except ValueError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    args.settings = settings  # (the commands read the environment through this one reading)
    if args.redis is None:
        args.redis = settings.redis_url
    if args.partitions is None:
        args.partitions = settings.partitions
    if args.log_level is None:
        args.log_level = settings.log_level
    logs.configure(args.log_level, settings.log_format)
    handler: Handler = args.handler
    return handler(args)

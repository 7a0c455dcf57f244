"""``parley replay --app M RUN_ID`` (or ``--file run.json``): replay a recorded history
against the current code; exit 0 when it matches, 1 with what differs when it does not.
Run it in CI against real waiting runs before a deploy rolls out."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson

from ..client import Runtime
from ..engine.replayer import ReplayReport, replay
from ..errors import ParleyError, UsageError
from ..models import Event
from ..registry import get_workflow
from .ops import import_app_options, report_error


def add_command(sub: Any, add_common: Any) -> None:
    parser = sub.add_parser(
        "replay", help="replay a run's recorded history against the current code"
    )
    add_common(parser)
    parser.add_argument(
        "--app", action="append", required=True, help="module defining the workflows"
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("run_id", nargs="?", help="a run in the store")
    source.add_argument("--file", help="a run exported with `parley runs export`")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=_replay_command)


def _replay_command(args: argparse.Namespace) -> int:
    try:
        import_app_options(args.app)
        report = asyncio.run(_replay(args))
    except ParleyError as exc:
        report_error(exc, as_json=args.json)
        return 2  # not 1: that is a mismatch
    _print(report, as_json=args.json)
    return 0 if report.ok else 1


async def _replay(args: argparse.Namespace) -> ReplayReport:
    if args.file:
        try:
            exported = orjson.loads(Path(args.file).read_bytes())
            run_id, workflow = exported["run_id"], exported["workflow"]
            events = [Event(e["id"], e["type"], e["data"]) for e in exported["events"]]
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise UsageError(
                f"expected a file written by `parley runs export`, got {args.file!r}: {exc}"
            ) from None
    else:
        async with Runtime(args.redis, partitions=args.partitions) as rt:
            run = await rt.get_run(args.run_id)
            run_id, workflow = run.run_id, run.workflow
            events = await rt.events(run_id)
    return await replay(get_workflow(workflow), run_id, events)


def _print(report: ReplayReport, *, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(
            orjson.dumps(
                {
                    "run_id": report.run_id,
                    "workflow": report.workflow,
                    "ok": report.ok,
                    "stopped": report.stopped,
                    "mismatch": report.mismatch,
                }
            ).decode()
            + "\n"
        )
        return
    if report.mismatch is None:
        print(f"{report.run_id} ({report.workflow}): matches ({report.stopped})")
        return
    print(f"{report.run_id} ({report.workflow}): MISMATCH at {report.mismatch['position']}")
    print(f"  recorded: {report.mismatch['recorded']}")
    print(f"  now:      {report.mismatch['now']}")

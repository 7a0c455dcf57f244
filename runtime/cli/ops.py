"""``parley runs ...`` and ``parley hooks ...``: what an operator looks at and does.

Human-readable tables by default, ``--json`` for scripts (one JSON document on stdout).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from ..client import Runtime
from ..errors import ParleyError, UsageError
from ..models import Event, RunStatus
from ..settings import DEFAULT_URL
from ..tags import parse_tag


def add_commands(sub: Any, add_common: Any) -> None:
    runs = sub.add_parser("runs", help="list, inspect and cancel runs")
    runs_sub = runs.add_subparsers(dest="action", required=True)
    listing = runs_sub.add_parser("list", help="list runs, newest first")
    listing.add_argument("--status", choices=[s.value for s in RunStatus])
    listing.add_argument("--version", help="only runs first executed by workers of this version")
    listing.add_argument(
        "--limit", type=_positive_int, default=100, metavar="N", help="at most N runs"
    )
    listing.add_argument(
        "--tag", metavar="KEY=VALUE", help="only runs with this tag (from the tag index)"
    )
    show = runs_sub.add_parser("show", help="a run: status, timeline, pending hooks")
    show.add_argument("run_id")
    cancel = runs_sub.add_parser("cancel", help="cancel a run")
    cancel.add_argument("run_id")
    cancel.add_argument("--reason")
    retry = runs_sub.add_parser(
        "retry", help="send a blocked run back to the workers (once matching code is deployed)"
    )
    retry.add_argument("run_id")
    restart = runs_sub.add_parser(
        "restart", help="continue a run as a new one from a step (keeps the steps before it)"
    )
    restart.add_argument("run_id")
    restart.add_argument(
        "--from-step", help="a step id (charge-0) or name; default: the step that failed"
    )
    export = runs_sub.add_parser(
        "export", help="a run and its whole log as JSON (for `parley replay --file`)"
    )
    export.add_argument("run_id")
    compact = runs_sub.add_parser(
        "compact",
        help="compact the ended runs left uncompacted (their worker stopped within seconds "
        "of their end); a scan of the store",
    )

    hooks = sub.add_parser("hooks", help="list and answer hooks")
    hooks_sub = hooks.add_subparsers(dest="action", required=True)
    hooks_list = hooks_sub.add_parser("list", help="pending hooks of every run")
    hooks_list.add_argument("--pending", action="store_true", help="(the default)")
    hooks_list.add_argument("--tag", metavar="KEY=VALUE", help="only hooks of runs with this tag")
    resume = hooks_sub.add_parser("resume", help="answer a hook (the same resume_hook path)")
    resume.add_argument("token")
    resume.add_argument("--payload", required=True, help="the answer, as JSON")
    for parser in (listing, show, cancel, retry, restart, export, compact, hooks_list, resume):
        add_common(parser)
        add_allow_memory(parser)
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.set_defaults(handler=_command)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def add_allow_memory(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-memory",
        action="store_true",
        help="run on the embedded memory:// store (it lives in this process only)",
    )


def embedded_store_refused(args: argparse.Namespace, what: str) -> bool:
    """True (and said on stderr) when ``args`` would run on the embedded ``memory://``
    store without ``--allow-memory``: it lives in this one process, so an operator would
    see an empty store, and a worker would never see the runs a server started."""
    url = args.redis or DEFAULT_URL
    if not url.startswith("memory://") or args.allow_memory:
        return False
    where = "no --redis URL or REDIS_URL was given" if args.redis is None else f"--redis {url}"
    print(
        f"parley {what}: refusing the embedded memory:// store ({where}): it lives in this "
        f"process only, so {what} would see nothing another process stored. Give --redis "
        "redis://host:port (or set REDIS_URL), or --allow-memory to use it anyway.",
        file=sys.stderr,
    )
    return True


def import_app_options(apps: Sequence[str]) -> None:
    """Import each ``--app`` module, or raise :class:`UsageError` saying which one and why
    (before, the ImportError was a traceback). Only ImportError is taken in: any other
    exception a module raises is a bug in it, and its traceback is what finds it."""
    for app in apps:
        if not all(part.isidentifier() for part in app.split(".")):
            raise UsageError(
                "--app: expected a module's import path (package.module, not module:attr "
                f"or a file), got {app!r}"
            )
        try:
            importlib.import_module(app)
        except ImportError as exc:
            raise UsageError(_import_failure(app, exc)) from None


def _import_failure(app: str, exc: ImportError) -> str:
    error = f"{type(exc).__name__}: {exc}"
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing is not None and (app == missing or app.startswith(missing + ".")):
        return (
            f"--app: expected a module this process can import, got {app!r}: {error} "
            "(install it, or put its directory on PYTHONPATH)"
        )
    # Found, but its own import raised: said as such, with where (an import of a module
    # it depends on, a name missing there), else it would read as a typo in --app.
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_importlib(f)]
    where = f" at {frames[-1].filename}, line {frames[-1].lineno}" if frames else ""
    return f"--app {app!r}: the module was found, but importing it failed{where}: {error}"


def _is_importlib(frame: traceback.FrameSummary) -> bool:
    return frame.filename.startswith("<frozen ") or frame.filename == importlib.__file__


def _command(args: argparse.Namespace) -> int:
    if embedded_store_refused(args, f"{args.command} {args.action}"):
        return 2
    return asyncio.run(run(args))


async def run(args: argparse.Namespace) -> int:
    # The store's URL, its partitions and its connection fail as ParleyErrors too (a
    # typo, Redis down): reported as the command's own errors, not as a traceback.
    try:
        async with Runtime(args.redis, partitions=args.partitions) as rt:
            return await _COMMANDS[(args.command, args.action)](rt, args)
    except ParleyError as exc:
        report_error(exc, as_json=args.json)
        return 1


def report_error(exc: ParleyError, *, as_json: bool) -> None:
    """``error: ...`` on stderr; with ``--json``, ``{"error": code, "message": ...}`` on
    stdout instead, so a script reads one JSON document whatever happened."""
    if as_json:
        _print_json({"error": exc.code, "message": str(exc)})
    else:
        print(f"error: {exc}", file=sys.stderr)


async def _runs_list(rt: Runtime, args: argparse.Namespace) -> int:
    tag = None if args.tag is None else parse_tag(args.tag, "=")
    if not args.json and tag is None:
        print("scanning runs...", file=sys.stderr, flush=True)
    runs = await rt.list_runs(args.status, limit=args.limit, version=args.version, tag=tag)
    if args.json:
        _print_json([r.to_json() for r in runs])
    else:
        _table(
            ["RUN", "WORKFLOW", "STATUS", "VERSION", "CREATED", "SESSION", "TAGS"],
            [
                [
                    r.run_id,
                    r.workflow,
                    r.status.value,
                    r.version or "-",
                    _when(r.created_at),
                    r.session or "-",
                    " ".join(f"{k}={v}" for k, v in r.tags.items()) or "-",
                ]
                for r in runs
            ],
        )
    return 0


async def _runs_show(rt: Runtime, args: argparse.Namespace) -> int:
    run = await rt.get_run(args.run_id)
    events = await rt.events(args.run_id)
    pending = [h for h in run.hooks if h.status.value == "pending"]
    if args.json:
        _print_json(
            {
                **run.to_json(),
                "events": [e.to_json() for e in events],
                "pending_hooks": [h.to_json() for h in pending],
            }
        )
        return 0
    print(f"run       {run.run_id}\nworkflow  {run.workflow}\nstatus    {run.status.value}")
    if run.result is not None:
        print(f"result    {orjson.dumps(run.result).decode()}")
    if run.error is not None:
        print(f"error     {run.error.get('type')}: {run.error.get('message')}")
    if run.version:
        print(f"version   {run.version}")
    if run.parent_run_id:
        print(f"parent    {run.parent_run_id}")
    if run.child_run_ids:
        print(f"children  {' '.join(run.child_run_ids)}")
    if run.restarted_from:
        print(f"restarted from {run.restarted_from}")
    if run.restarted_as:
        print(f"restarted as   {run.restarted_as}")
    if run.continued_from:
        print(f"continued from {run.continued_from}")
    if run.continued_to:
        print(f"continued to   {run.continued_to}")
    print("\ntimeline")
    _table(
        ["TIME", "EVENT", "DETAIL"],
        [[_when(e.timestamp_ms / 1000), e.type, _detail(e)] for e in events],
    )
    if pending:
        print("\npending hooks")
        _table(
            ["TOKEN", "NAME", "EXPIRES"], [[h.token, h.name, _when(h.expires_at)] for h in pending]
        )
    return 0


async def _runs_cancel(rt: Runtime, args: argparse.Namespace) -> int:
    await rt.cancel(args.run_id, reason=args.reason)
    if args.json:
        _print_json({"run_id": args.run_id, "status": "cancelled"})
    else:
        print(f"cancelled {args.run_id}")
    return 0


async def _runs_retry(rt: Runtime, args: argparse.Namespace) -> int:
    await rt.retry(args.run_id)
    if args.json:
        _print_json({"run_id": args.run_id, "status": "pending"})
    else:
        print(f"retrying {args.run_id}")
    return 0


async def _runs_restart(rt: Runtime, args: argparse.Namespace) -> int:
    new_id = await rt.restart(args.run_id, args.from_step)
    if args.json:
        _print_json({"run_id": new_id, "restarted_from": args.run_id, "status": "pending"})
    else:
        print(f"restarted {args.run_id} as {new_id}")
    return 0


async def _runs_export(rt: Runtime, args: argparse.Namespace) -> int:
    run = await rt.get_run(args.run_id)
    events = await rt.events(args.run_id)
    _print_json({**run.to_json(), "events": [e.to_json() for e in events]})
    return 0


async def _runs_compact(rt: Runtime, args: argparse.Namespace) -> int:
    compacted = await rt.compact_ended()
    if args.json:
        _print_json({"compacted": compacted})
    else:
        print(f"{compacted} ended runs compacted")
    return 0


async def _hooks_list(rt: Runtime, args: argparse.Namespace) -> int:
    tag = None if args.tag is None else parse_tag(args.tag, "=")
    hooks = await rt.list_hooks(tag=tag)
    if args.json:
        _print_json([h.to_json() for h in hooks])
    else:
        _table(
            ["TOKEN", "NAME", "EXPIRES", "SESSION"],
            [[h.token, h.name, _when(h.expires_at), h.session or "-"] for h in hooks],
        )
    return 0


async def _hooks_resume(rt: Runtime, args: argparse.Namespace) -> int:
    try:
        # Every integer read exactly, as the server reads a body: orjson alone turns one
        # beyond 64 bits into a float, which would be recorded as another number.
        payload = Runtime.decode(args.payload)
    except ValueError as exc:
        raise UsageError(f"--payload must be JSON, got {args.payload!r}: {exc}") from None
    recorded = await rt.resume_hook(args.token, payload)
    if args.json:
        _print_json({"token": args.token, "recorded": recorded})
    else:
        print("answer recorded" if recorded else "the same answer was already recorded")
    return 0


_COMMANDS = {
    ("runs", "list"): _runs_list,
    ("runs", "show"): _runs_show,
    ("runs", "compact"): _runs_compact,
    ("runs", "cancel"): _runs_cancel,
    ("runs", "retry"): _runs_retry,
    ("runs", "restart"): _runs_restart,
    ("runs", "export"): _runs_export,
    ("hooks", "list"): _hooks_list,
    ("hooks", "resume"): _hooks_resume,
}


def _print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _detail(event: Event) -> str:
    data = {k: v for k, v in event.data.items() if k not in ("schema",)}
    text = orjson.dumps(data).decode()
    return text if len(text) <= 80 else text[:77] + "..."


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        print("(none)")

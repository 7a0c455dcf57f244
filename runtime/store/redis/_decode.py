"""Turning raw Redis replies into the store's typed results and the runtime's models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._codec import loads
from ...models import Event, RunInfo, RunStatus
from . import _records


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def opt_text(value: bytes | str | None) -> str | None:
    return text(value) if value else None


def _type_and_data(fields: Any) -> tuple[Any, Any]:
    """An entry's type and data from its fields: inside a script a flat list, in the order
    XADD wrote them (``[b"t", type, b"d", data]``) or not; outside a script a dict."""
    if type(fields) is list and len(fields) == 4 and fields[0] == b"t":
        return fields[1], fields[3]
    if isinstance(fields, dict):
        return fields[b"t"], fields[b"d"]
    mapping = {text(fields[i]): fields[i + 1] for i in range(0, len(fields), 2)}
    return mapping["t"], mapping["d"]


def events(entries: list[Any]) -> list[Event]:
    """Events from the raw reply of XRANGE on a run's event stream (inside a script the
    fields come as a flat list, outside as a dict)."""
    out = []
    for entry_id, fields in entries:
        kind, data = _type_and_data(fields)
        out.append(Event(text(entry_id), text(kind), loads(data)))
    return out


def script_events(entries: list[Any]) -> tuple[list[Event], int]:
    """The events of a script's reply of a run's log entries and the bytes of their data,
    in one pass: a claim's and a write's."""
    out = []
    size = 0
    for entry_id, fields in entries:
        kind, data = _type_and_data(fields)
        size += len(data)
        out.append(Event(entry_id.decode(), kind.decode(), loads(data)))
    return out, size


def as_dict(flat: Sequence[Any]) -> dict[Any, Any]:
    """A flat ``[field, value, ...]`` reply as a dict (HGETALL's and a stream entry's form
    in RESP2 and in Lua; RESP3 sends a map, which stays one)."""
    if isinstance(flat, dict):
        return flat
    return dict(zip(flat[::2], flat[1::2], strict=True))


def flat_hash(flat: list[bytes]) -> dict[str, bytes]:
    """A hash returned by HGETALL inside a script (a flat list of fields and values)."""
    if not flat:
        return {}
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def run_info(run_id: str, run: dict[bytes, bytes], hooks: dict[bytes, bytes]) -> RunInfo:
    status = RunStatus(run[b"status"].decode())
    out = run.get(b"out")
    session = opt_text(run.get(b"session"))
    created = run.get(b"created")
    if status is RunStatus.FAILED and out:
        error = loads(out)
    elif status is RunStatus.BLOCKED and run.get(b"blocked"):
        error = loads(run[b"blocked"])
    else:
        error = None
    return RunInfo(
        run_id=run_id,
        workflow=run[b"wf"].decode(),
        status=status,
        result=loads(out) if out and status is RunStatus.COMPLETED else None,
        error=error,
        session=session,
        created_at=int(created) / 1000 if created else None,
        hooks=_records.decode_all(run_id, hooks, session),
        version=opt_text(run.get(b"ver")),
        restarted_from=opt_text(run.get(b"restarted_from")),
        restarted_as=opt_text(run.get(b"restarted_as")),
        continued_from=opt_text(run.get(b"continued_from")),
        continued_to=opt_text(run.get(b"continued_to")),
        parent_run_id=opt_text(run.get(b"parent")),
        tags=loads(run[b"tags"]) if run.get(b"tags") else {},
    )

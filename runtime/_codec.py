"""JSON encoding with size limits, and duration parsing.

Values crossing Redis are JSON (orjson) only: nothing read from Redis can execute code.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from datetime import datetime, timedelta
from typing import Any

import orjson

from .errors import InvalidPayload, PayloadTooLarge, UsageError

_DUMP_OPTS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=_DUMP_OPTS)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


# JSON numbers are IEEE doubles for most readers (JavaScript, jq, many databases): an
# integer is read back as the same integer only within ±2**53.
MAX_EXACT_INT = 2**53


def loads_exact(data: bytes | str) -> Any:
    """JSON from outside, with every integer read exactly. orjson reads an integer literal
    beyond 64 bits as a float (silently another value); such a document is read again by
    the standard library, which keeps it an int, so :func:`check_portable` can refuse it
    by its real value. Malformed JSON raises ``ValueError`` (``orjson.JSONDecodeError``)."""
    value = orjson.loads(data)
    if not _has_float_beyond_int64(value):
        return value
    try:
        return json.loads(data)
    except RecursionError:
        raise InvalidPayload("the JSON document is nested too deeply to be read") from None


def _has_float_beyond_int64(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if abs(item) >= 2.0**63:  # orjson keeps any integer in [-2**63, 2**64) an int
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def check_portable(
    value: Any,
    *,
    what: str,
    max_depth: int,
    run_id: str | None = None,
    hook_id: str | None = None,
) -> None:
    """Refuse what would not come back as it was sent: containers nested deeper than
    ``max_depth`` (the deeper frames that carry a value cannot be encoded, and every
    reader pays for the depth) and integers beyond ±2**53."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            if not -MAX_EXACT_INT <= item <= MAX_EXACT_INT:
                raise InvalidPayload(
                    f"{what}: integers must be within ±2**53 (JSON numbers are exact only "
                    f"there); got {_describe_int(item)}",
                    run_id=run_id,
                    hook_id=hook_id,
                )
            continue
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            children = [getattr(item, f.name) for f in dataclasses.fields(item)]
        else:
            continue
        if level > max_depth:
            raise InvalidPayload(
                f"{what} may nest objects and arrays at most {max_depth} levels deep, got "
                f"deeper (Limits.max_depth)",
                run_id=run_id,
                hook_id=hook_id,
            )
        stack.extend((child, level + 1) for child in children)


def _describe_int(value: int) -> str:
    if value.bit_length() > 256:  # str() of a huge int is slow, and unreadable anyway
        return f"an integer of {value.bit_length()} bits"
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} digits)"


def encode_fragment(key: str, encoded: bytes, **fields: Any) -> bytes:
    """JSON object ``{key: <already-encoded value>, **fields}`` without re-encoding it."""
    return orjson.dumps({key: orjson.Fragment(encoded), **fields})


def encode_value(
    value: Any,
    *,
    what: str,
    limit: int,
    run_id: str | None = None,
    hook_id: str | None = None,
    max_depth: int | None = None,
) -> bytes:
    """Encode ``value`` canonically (sorted keys) and enforce ``limit`` bytes; with
    ``max_depth``, first :func:`check_portable` (what enters from outside)."""
    if max_depth is not None:
        check_portable(value, what=what, max_depth=max_depth, run_id=run_id, hook_id=hook_id)
    try:
        data = dumps(value)
    except TypeError as exc:
        raise InvalidPayload(
            f"{what} must be JSON-serializable, got {type(value).__name__}: {exc}",
            run_id=run_id,
            hook_id=hook_id,
        ) from None
    if b"null" in data and _has_non_finite(value):
        # orjson writes NaN/Infinity as null: refuse instead of silently changing the value.
        raise InvalidPayload(
            f"{what} contains NaN or Infinity, which JSON cannot represent",
            run_id=run_id,
            hook_id=hook_id,
        )
    if len(data) > limit:
        raise PayloadTooLarge(
            f"{what} is {len(data)} bytes, the limit is {limit}", run_id=run_id, hook_id=hook_id
        )
    return data


def _has_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            # orjson encodes dataclasses natively: their fields are values too
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return False


_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}

Duration = float | int | timedelta | str


def parse_duration(value: Duration, *, what: str = "duration") -> float:
    """Seconds from a number of seconds, a ``timedelta`` or a string like "30s", "5m", "24h"."""
    if isinstance(value, bool):
        raise UsageError(f"{what} must be seconds, a timedelta or a string like '5m', got a bool")
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match is None:
            raise UsageError(
                f"{what} must look like '30s', '5m', '24h', '2d' or '250ms', got {value!r}"
            )
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    else:
        raise UsageError(
            f"{what} must be seconds, a timedelta or a string like '5m', got {type(value).__name__}"
        )
    if not math.isfinite(seconds):
        raise UsageError(f"{what} must be a finite number of seconds, got {value!r}")
    if seconds < 0:
        raise UsageError(f"{what} must not be negative, got {value!r}")
    return seconds


# A deadline: a duration from now, or an aware datetime (an instant in a time zone).
Deadline = Duration | datetime


def check_deadline(value: Deadline, *, what: str = "timeout") -> float | datetime:
    """Seconds (a duration, checked) or an aware datetime (a naive one is refused: it
    names no instant)."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise UsageError(
                f"{what} must be a datetime with a time zone, e.g. "
                f"datetime(2026, 12, 4, 17, tzinfo=ZoneInfo('Europe/Paris')); got a naive "
                f"datetime {value.isoformat()!r}, which names no instant"
            )
        return value
    return parse_duration(value, what=what)


def due_ms(deadline: float | datetime, now_ms: int) -> int:
    """The instant (ms since the epoch) a checked deadline falls on."""
    if isinstance(deadline, datetime):
        return int(deadline.timestamp() * 1000)
    return now_ms + int(deadline * 1000)

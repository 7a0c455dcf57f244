"""What a run that continues as new (``continue_as_new``) hands to its successor: a
conversation that never ends goes on in a fresh run with an empty log instead of growing
one log forever."""

from __future__ import annotations

from typing import Any

import orjson

from .. import tracing
from .._codec import encode_value
from ..models import LOG_FORMAT
from .signals import ContinueAsNew


def successor_input(
    signal: ContinueAsNew, tags: dict[str, str], stored: str | None, limit: int, run_id: str
) -> tuple[bytes, bytes | None]:
    """The successor's workflow.started data (its arguments, the run's current tags, the
    run's trace context: ``stored``, its own, handed on also with tracing off) and
    its tags as the store indexes them (None: untagged)."""
    started: dict[str, Any] = {"args": list(signal.args_), "scoped": LOG_FORMAT}
    if signal.kwargs:
        started["kwargs"] = signal.kwargs
    if tags:
        started["tags"] = tags
    trace = tracing.continued_traceparent(stored)
    if trace is not None:  # the successor's executions continue the run's trace
        started["trace"] = trace
    encoded = encode_value(started, what="continue_as_new input", limit=limit, run_id=run_id)
    return encoded, orjson.dumps(tags, option=orjson.OPT_SORT_KEYS) if tags else None

"""OpenTelemetry tracing of runs (the ``parley[otel]`` extra), off by default.

Off, nothing here imports ``opentelemetry`` and every hook below is one ``if`` on a module
global: runs pay nothing. :func:`enable` (or ``PARLEY_TRACING=1`` / ``PARLEY_TRACING_FILE``
in a ``parley`` process, :func:`configure`) turns it on. Then:

- ``parley.start`` (``Runtime.start``): its W3C ``traceparent`` is stored with the run, in
  the ``trace`` field of its ``workflow.started`` event;
- ``parley.execution``: every execution of the run, on whichever worker and however many
  days later, is a child of that stored context — the run is one trace — with a link to
  the ``parley.resume_hook`` span of the answer that woke it (its ``traceparent`` is in
  the ``hook.received`` event);
- ``parley.step``: each step attempt, inside its execution;
- ``parley.hook.wait``: each hook wait that ended (answered or expired), from the hook's
  creation to its end, recorded once by the execution that the end woke, when it went on
  (not by one abandoned: the execution that runs the run again records it), or by the
  execution that took the end as it ran (its suspension refused: :func:`took`);
- ``parley.resume_hook``: an answer, in the caller's current trace (an HTTP request's);
- a store outage inside an execution (``StoreUnavailable``) marks its step's and its
  execution's spans ERROR (those attempts did not do their work) with the exception and
  a description that says the run is not failed: the execution is abandoned and runs
  again (its ``parley.outcome``: ``abandoned``);
- a run started by ``child()`` stores the ``traceparent`` of the parent's execution that
  started it (its executions are children of that one, in the parent's trace); a run
  started by ``continue_as_new`` stores its predecessor's stored context (the same trace,
  its executions children of the same ``parley.start``). A worker with tracing off hands
  on the run's stored context as is: a traced run stays one trace whoever executes it.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import UsageError, outage
from .models import Event, EventType
from .settings import Settings

__all__ = [
    "abandoned",
    "annotate",
    "child_traceparent",
    "configure",
    "continued_traceparent",
    "disable",
    "enable",
    "enabled",
    "executing",
    "record_span",
    "span",
    "took",
    "traceparent",
]

TRACER_NAME = "parley"
_tracer: Any = None  # an opentelemetry Tracer while tracing is on; None: off


def enabled() -> bool:
    return _tracer is not None


def enable(tracer_provider: Any = None) -> None:
    """Trace runs with ``tracer_provider`` (default: OpenTelemetry's global provider, as
    the application or ``opentelemetry-instrument`` configured it). Needs the
    ``parley[otel]`` extra (UsageError without it)."""
    _enable(tracer_provider, "tracing")


def _enable(tracer_provider: Any, asked_by: str) -> None:
    global _tracer
    trace = _otel("opentelemetry.trace", asked_by)
    _tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)


def _otel(module: str, asked_by: str) -> Any:
    """``module`` of OpenTelemetry, or a UsageError that says who wanted it and what to
    install: a ``parley`` process started with PARLEY_TRACING says it in a line."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = exc.name or module
        raise UsageError(
            f"{asked_by} needs OpenTelemetry ({missing} is not installed): "
            "pip install 'parley[otel]'"
        ) from exc


def disable() -> None:
    global _tracer
    _tracer = None


def configure(settings: Settings) -> None:
    """What a ``parley`` process does at start: ``PARLEY_TRACING_FILE`` writes every
    finished span as a JSON line to that file (flushed at once: a killed process loses no
    finished span); ``PARLEY_TRACING=1`` uses the global provider."""
    if settings.tracing_file:
        _otel("opentelemetry.sdk.trace", "PARLEY_TRACING_FILE")  # said plainly if missing
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": "parley"}))
        provider.add_span_processor(
            SimpleSpanProcessor(_json_lines_exporter(settings.tracing_file))
        )
        _enable(provider, "PARLEY_TRACING_FILE")
    elif settings.tracing:
        _enable(None, "PARLEY_TRACING=1")


def _w3c() -> Any:
    """W3C trace context's own propagator, not the process's global one: what is stored is
    a ``traceparent`` whatever the process propagates (OTEL_PROPAGATORS=b3, or none), and
    a worker reads it back whatever its own setting."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def traceparent() -> str | None:
    """The current span's W3C ``traceparent``, to store with what it caused."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    _w3c().inject(carrier)
    return carrier.get("traceparent")


class _Execution:
    """What tracing keeps of the worker's traced execution it is inside (:func:`executing`):
    its ``parley.execution`` span (the first span opened inside it) and the hook waits it
    took (:func:`took`), one span each."""

    __slots__ = ("span", "taken")

    def __init__(self) -> None:
        self.span: Any = None
        # hook id -> (run id, its creation, its end (ms), answered | expired)
        self.taken: dict[str, tuple[str, int, int, str]] = {}


# The worker's execution that the current span is inside (None: none): an outage there is
# not the failure of what the span does, which runs again (see _described).
_execution: contextvars.ContextVar[_Execution | None] = contextvars.ContextVar(
    "parley_execution", default=None
)
RUNS_AGAIN = "a store outage, not a failure: the execution is abandoned and runs again"


@contextlib.contextmanager
def executing() -> Iterator[None]:
    """Inside the block, spans are inside a worker's execution (the first one opened is
    its ``parley.execution``). The run's stored trace context is the execution's replay
    index's (``ReplayIndex.trace``), also with tracing off."""
    token = _execution.set(_Execution())
    try:
        yield
    finally:
        _execution.reset(token)


def child_traceparent(stored: str | None) -> str | None:
    """The ``traceparent`` a run that the current execution starts with ``child()``
    stores: the current span's (the parent's execution, in its trace); with tracing off
    the parent run's own ``stored`` one as is (None: untraced), so that a run started by
    a traced client stays one trace when a worker that does not trace executes it."""
    if _tracer is None:
        return stored
    return traceparent() or stored


def continued_traceparent(stored: str | None) -> str | None:
    """The ``traceparent`` a run that continues the current execution's run stores: that
    run's own ``stored`` one (also with tracing off), else (started untraced) the current
    span's. Not the current span's first: each successor's executions would nest one
    level deeper than its predecessor's, and a conversation that never ends would grow a
    trace without end."""
    if _tracer is None or stored:
        return stored
    return traceparent()


_HOOK_ENDS: dict[str, str] = {
    EventType.HOOK_RECEIVED: "answered",
    EventType.HOOK_EXPIRED: "expired",
}
# The ends of an execution that recorded the hook waits that had ended before them.
_WAITS_RECORDED = frozenset(
    {EventType.STEP_SUSPENDED, EventType.WORKFLOW_SUSPENDED, EventType.WORKFLOW_BLOCKED}
)


def took(run_id: str, log: Sequence[Event]) -> None:
    """The current execution takes the hook waits that ended since its run last suspended
    (or was blocked): those its claim read (``log``, the claimed log), and those that came
    as it ran, its suspension refused (``log``, the run's log as it is then). Their
    ``parley.hook.wait`` spans are its own, recorded when it went on (its execution span
    ends without an error: an execution abandoned records none, the one that runs the run
    again from the same suspension does), each once."""
    execution = _execution.get()
    if _tracer is None or execution is None:
        return
    last = max((i for i, e in enumerate(log) if e.type in _WAITS_RECORDED), default=-1)
    created = {
        e.data.get("hook_id"): e.timestamp_ms for e in log if e.type == EventType.HOOK_CREATED
    }
    for ended in log[last + 1 :]:
        outcome = _HOOK_ENDS.get(ended.type)
        hook_id = ended.data.get("hook_id")
        if outcome is not None and isinstance(hook_id, str) and hook_id in created:
            execution.taken[hook_id] = (run_id, created[hook_id], ended.timestamp_ms, outcome)


def _record_taken(execution: _Execution) -> None:
    """The spans of the waits the execution took (:func:`took`), children of its current
    span."""
    for hook_id, (run_id, created_ms, ended_ms, outcome) in execution.taken.items():
        record_span(
            "parley.hook.wait",
            created_ms,
            ended_ms,
            {"parley.run_id": run_id, "parley.hook_id": hook_id, "parley.outcome": outcome},
        )


def _context(parent: str | None) -> Any:
    if not parent:
        return None
    return _w3c().extract({"traceparent": parent})


def _links(parents: Sequence[str]) -> list[Any]:
    from opentelemetry import trace

    links = []
    for parent in parents:
        context = trace.get_current_span(_context(parent)).get_span_context()
        if context.is_valid:
            links.append(trace.Link(context))
    return links


@contextlib.contextmanager
def span(
    name: str,
    *,
    parent: str | None = None,
    links: Sequence[str] = (),
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Any]:
    """A span around the block (the current span inside it), child of the current span
    or of ``parent`` (a stored ``traceparent``); yields None when tracing is off. An
    ``Exception`` marks it failed; a suspension (not an ``Exception``) does not."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.trace import Status, StatusCode

    with _tracer.start_as_current_span(
        name,
        context=_context(parent),
        links=_links(links),
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        execution = _execution.get()
        if execution is not None and execution.span is None:
            execution.span = current  # (the worker's parley.execution)
        try:
            yield current
        except Exception as exc:
            current.record_exception(exc)
            current.set_status(Status(StatusCode.ERROR, _described(exc)))
            raise
        except BaseException as exc:  # a suspension, an abort: how it ended, not an error
            current.set_attribute("parley.unwound", type(exc).__name__)
            raise
        if execution is not None and execution.span is current:
            _record_taken(execution)  # it went on: the waits it took as it ran


def _described(exc: Exception) -> str:
    """A failed span's status description: the exception; inside an execution, an outage
    says that the run is not failed and that the execution runs again (a step that met
    one is not failed either: the engine abandons the execution, engine/steps.py)."""
    said = f"{type(exc).__name__}: {exc}"
    if _execution.get() is not None and outage(exc) is not None:
        return f"{said} ({RUNS_AGAIN})"
    return said


def abandoned(error: Exception) -> None:
    """The current execution's span ends abandoned by ``error``: a store outage is
    recorded (the exception, status ERROR saying it runs again); another reason (a lease
    lost, an interruption by an answer) is not an error of the execution's."""
    if _tracer is None:
        return
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    current = trace.get_current_span()
    current.set_attribute("parley.outcome", "abandoned")
    if outage(error) is not None:
        current.record_exception(error)
        current.set_status(
            Status(StatusCode.ERROR, f"{type(error).__name__}: {error} ({RUNS_AGAIN})")
        )


def annotate(attributes: Mapping[str, Any]) -> None:
    """Attributes of the current span (when tracing is on)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(dict(attributes))


def record_span(
    name: str, start_ms: int, end_ms: int, attributes: Mapping[str, Any] | None = None
) -> None:
    """A span that already happened (a hook wait, from its creation to its answer), as a
    child of the current span."""
    if _tracer is None:
        return
    recorded = _tracer.start_span(
        name, start_time=start_ms * 1_000_000, attributes=dict(attributes or {})
    )
    recorded.end(end_time=max(start_ms, end_ms) * 1_000_000)


def _json_lines_exporter(path: str) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    target = Path(path)

    class JsonLinesExporter(SpanExporter):
        def export(self, spans: Sequence[Any]) -> Any:
            lines = "".join(json.dumps(span_json(finished)) + "\n" for finished in spans)
            # One write on an O_APPEND descriptor: whole lines, also when a worker and a
            # server share the file (a span with a stack trace is past a buffer's 8 KB).
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, lines.encode())
            finally:
                os.close(fd)
            return SpanExportResult.SUCCESS

    return JsonLinesExporter()


def span_json(finished: Any) -> dict[str, Any]:
    """A finished SDK span as plain JSON (ids in hex, as in a ``traceparent``)."""
    context = finished.get_span_context()
    parent = finished.parent
    return {
        "name": finished.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_span_id": None if parent is None else f"{parent.span_id:016x}",
        "start_ns": finished.start_time,
        "end_ns": finished.end_time,
        "status": finished.status.status_code.name,
        "status_description": finished.status.description,
        "attributes": dict(finished.attributes or {}),
        # what the span recorded on the way, a failure's exception (type, message, stack
        # trace) above all: without it a failed step said ERROR and not why
        "events": [
            {
                "name": event.name,
                "time_ns": event.timestamp,
                "attributes": dict(event.attributes or {}),
            }
            for event in finished.events
        ],
        "links": [
            {"trace_id": f"{link.context.trace_id:032x}", "span_id": f"{link.context.span_id:016x}"}
            for link in finished.links
        ],
    }

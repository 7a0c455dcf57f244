"""One execution of a run by a worker that holds its lease: replay, buffered writes, and
the end of the execution (suspension or finish).

Writes are buffered and flushed in one fenced script at the next durable point (a hook's
creation, a suspension, the end of the run, or before a step with side effects runs after
a recorded step result), so a HITL lifecycle costs a handful of round trips.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import _faults
from ._codec import dumps, encode_value
from ._keys import RunKeys, make_token
from ._replay import ReplayIndex, parse_stream_entries
from .errors import EventLimitExceeded, LeaseLost, ParleyError
from .models import Event

if TYPE_CHECKING:
    from .registry import WorkflowDef
    from .runtime import Runtime

log = logging.getLogger("parley.execution")

_WAKING_EVENTS = frozenset({"hook.received", "hook.expired", "timer.fired"})


class Suspend(BaseException):
    """Unwinds the workflow to the worker: the run waits for ``wait`` (hook or timer id).

    A BaseException so that user code's ``except Exception`` (or an agent framework's
    tool-error middleware) cannot swallow a suspension.
    """

    def __init__(self, wait: str, step_id: str | None = None) -> None:
        super().__init__(wait)
        self.wait = wait
        self.step_id = step_id


class Interrupted(ParleyError):
    code = "interrupted"


class Abort(BaseException):
    """Unwinds the workflow to the worker without writing anything more (lease lost,
    Redis unreachable, a write interrupted)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class StepScope:
    step_id: str
    name: str
    hook_counters: dict[str, int] = field(default_factory=dict)


current_execution: ContextVar[Execution | None] = ContextVar("parley_execution", default=None)
current_step: ContextVar[StepScope | None] = ContextVar("parley_step", default=None)


def now_ms() -> int:
    return int(time.time() * 1000)


class Execution:
    def __init__(
        self,
        runtime: Runtime,
        keys: RunKeys,
        workflow: WorkflowDef,
        fence: str,
        session: str | None,
        events: list[Event],
        checkpoints: dict[str, bytes],
    ) -> None:
        self.runtime = runtime
        self.keys = keys
        self.run_id = keys.run_id
        self.workflow = workflow
        self.fence = fence
        self.session = session
        self.index = ReplayIndex()
        self.index.add_all(events)
        self.last_id = events[-1].id if events else "0-0"
        # The answer/expiry/timer that woke this execution, for the resume-latency metric.
        self.woken_at_ms = (
            events[-1].timestamp_ms if events and events[-1].type in _WAKING_EVENTS else None
        )
        self.outcome = "running"  # then: suspended | completed | failed
        self.checkpoints = checkpoints
        self.notified: set[str] = set()  # hooks whose on_created ran in this execution
        self._ops: list[bytes | str | int] = []
        self.flush_before_step = False
        self._step_counters: dict[str, int] = {}
        self._hook_counter = 0
        self._timer_counter = 0

    def __repr__(self) -> str:
        return f"<Execution {self.run_id} fence={self.fence}>"

    # ids -----------------------------------------------------------------------------
    def next_step_id(self, name: str) -> str:
        n = self._step_counters.get(name, 0)
        self._step_counters[name] = n + 1
        return f"{name}-{n}"

    def next_workflow_hook_id(self, name: str) -> str:
        n = self._hook_counter
        self._hook_counter += 1
        return f"h{n}.{name}"

    def next_timer_id(self) -> str:
        n = self._timer_counter
        self._timer_counter += 1
        return f"t{n}"

    def token(self, hook_id: str) -> str:
        return make_token(self.run_id, hook_id)

    # buffered writes -------------------------------------------------------------------
    def record(self, event_type: str, data: dict[str, Any]) -> None:
        """Buffer an event and apply it to the index at once (replay sees our own writes)."""
        self.index.add(event_type, data)
        self._ops += ["E", event_type, dumps(data)]

    def record_raw(self, event_type: str, encoded: bytes, data: dict[str, Any]) -> None:
        self.index.add(event_type, data)
        self._ops += ["E", event_type, encoded]

    def op(self, *parts: bytes | str | int) -> None:
        self._ops += parts

    async def flush(self) -> None:
        if self._ops:
            arrived = await self._apply("")
            self.flush_before_step = False
            # Answers/expiries that landed while we ran: known now, since last_id has
            # moved past them.
            self.index.add_all(arrived or [])

    async def _apply(
        self,
        mode: str,
        *,
        status: str = "",
        value: bytes = b"",
        event_slack: int = 0,
    ) -> list[Event] | None:
        ops, self._ops = self._ops, []
        limits = self.runtime.limits
        try:
            reply = await self._call_apply(mode, status, value, event_slack, ops)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            # Redis is unreachable: this is not the step's failure. Unwind past user code
            # (a BaseException) and leave the task pending; it is retried after the outage.
            raise Abort(exc) from exc
        except asyncio.CancelledError:
            # Interrupted mid-write (a step timeout, a cancel): whether the script ran is
            # unknown while the index already holds the writes, so neither can be trusted.
            # Start over from the log (the worker re-dispatches the task).
            raise Abort(
                Interrupted(
                    "a write was interrupted; the run restarts from its log", run_id=self.run_id
                )
            ) from None
        kind = reply[0]
        if kind == b"lost":
            raise Abort(LeaseLost("another worker or a cancel took over", run_id=self.run_id))
        if kind == b"limit":
            raise EventLimitExceeded(
                f"the run reached its limit of {limits.max_events} events", run_id=self.run_id
            )
        arrived = parse_stream_entries(reply[2])
        if reply[1]:
            self.last_id = reply[1].decode()
        elif arrived:
            self.last_id = arrived[-1].id
        if kind == b"continue":
            return arrived
        return None if mode == "suspend" else arrived

    async def _call_apply(
        self, mode: str, status: str, value: bytes, event_slack: int, ops: list[bytes | str | int]
    ) -> Any:
        return await self.runtime.scripts.apply(
            keys=[
                self.keys.run,
                self.keys.events,
                self.keys.ckpt,
                self.keys.hooks,
                self.keys.tasks,
                self.keys.deadlines,
                self.keys.pending,
                self.keys.stats,
            ],
            args=[
                self.fence,
                now_ms(),
                self.runtime.limits.max_events + event_slack,
                self.run_id,
                mode,
                self.last_id,
                status,
                value,
                self.runtime.retention_seconds,
                *ops,
            ],
        )

    # the execution loop ----------------------------------------------------------------
    async def run(self) -> None:
        """Run the workflow until it suspends or finishes; replays in place if an answer
        (or expiry, or timer) arrived while this execution was still running."""
        while True:
            self._step_counters.clear()
            self._hook_counter = 0
            self._timer_counter = 0
            token = current_execution.set(self)
            try:
                result = await self.workflow.fn(*self.index.args, **self.index.kwargs)
            except Suspend as suspend:
                external = await self._suspend(suspend)
                if external is None:
                    return
                self.index.add_all(external)
                continue
            except Abort:
                raise
            except Exception as exc:
                await self._finish_failed(exc)
                return
            finally:
                current_execution.reset(token)
            await self._finish_completed(result)
            return

    async def _suspend(self, suspend: Suspend) -> list[Event] | None:
        self.op("S")
        if suspend.wait not in self.index.suspended_on:
            if suspend.step_id is not None:
                self.record("step.suspended", {"step_id": suspend.step_id, "wait": suspend.wait})
            else:
                self.record("workflow.suspended", {"wait": suspend.wait})
        try:
            external = await self._apply("suspend")
        except EventLimitExceeded as exc:
            await self._finish_failed(exc)
            return None
        if external is None:
            self.outcome = "suspended"
        else:
            # The suspension was refused (and not recorded): forget it so the next
            # suspension on this wait records it.
            self.index.suspended_on.discard(suspend.wait)
        return external

    async def _finish_completed(self, result: Any) -> None:
        try:
            encoded = encode_value(
                result,
                what="workflow result",
                limit=self.runtime.limits.max_payload_bytes,
                run_id=self.run_id,
            )
        except Exception as exc:
            await self._finish_failed(exc)
            return
        self.record_raw("workflow.completed", b'{"result":' + encoded + b"}", {"result": None})
        self._notify_status("completed")
        try:
            await self._apply("finish", status="completed", value=encoded)
        except EventLimitExceeded as exc:
            await self._finish_failed(exc)
            return
        self.outcome = "completed"
        _faults.crash_point("after_final_event")

    async def _finish_failed(self, exc: BaseException) -> None:
        error = describe_error(exc)
        log.info("run failed: %s", error["message"], extra={"run_id": self.run_id})
        self.record("workflow.failed", {"error": error})
        self._notify_status("failed", error=error)
        await self._apply("finish", status="failed", value=dumps(error), event_slack=16)
        self.outcome = "failed"
        _faults.crash_point("after_final_event")

    def _notify_status(self, status: str, **extra: Any) -> None:
        if self.session:
            self.op(
                "O", dumps({"type": "status", "status": status, "run_id": self.run_id, **extra})
            )


def describe_error(exc: BaseException) -> dict[str, Any]:
    code = getattr(exc, "code", None)
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(code, str):
        error["code"] = code
    return error


def encode_fragment(key: str, encoded: bytes, **fields: Any) -> bytes:
    """JSON object ``{key: <already-encoded value>, **fields}`` without re-encoding it."""
    return orjson.dumps({key: orjson.Fragment(encoded), **fields})

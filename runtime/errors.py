"""The exception tree of Parley.

Every error the runtime raises on purpose derives from :class:`ParleyError`, and
carries the run id and/or hook id it concerns, so a log line or an HTTP error
response can always say *which* run went wrong::

    ParleyError
    ├── UsageError                 the API was called the wrong way (outside a step, bad name, ...)
    │   ├── WorkflowNotFound       no workflow registered under that name
    │   └── InvalidTag             a tag key or value that is not allowed (runtime.tags)
    ├── InvalidToken               a hook token that is not "<run_id>:<hook_id>"
    ├── InvalidLink                an answer link: malformed, altered, expired, of a retired key
    ├── InvalidPayload             an answer/result/checkpoint that is not JSON or fails the schema
    │   └── PayloadTooLarge        bigger than the configured limit
    ├── RunNotFound                no run with that id
    ├── RunFinished                the run already completed, failed or was cancelled
    ├── HookNotFound               the run exists but has no such hook
    ├── HookAlreadyAnswered        a *different* payload was already accepted (conflict)
    ├── HookExpired                the hook's deadline passed before an answer came
    │   ├── HookCancelled          the run was cancelled while the hook was pending
    │   └── HookClosed             another wait of its first(...) finished first
    ├── HookTimeout                raised inside the workflow/step when on_timeout="raise"
    ├── MessageTimeout             receive() got no message before its timeout
    ├── EventLimitExceeded         the run reached its maximum number of events
    ├── LeaseLost                  this worker no longer owns the run (another took over)
    ├── StepFailed                 a step raised after its last retry
    ├── ChildFailed                a run started with child() failed or was cancelled
    ├── RunFailed                  `Runtime.wait` on a run that failed
    ├── RunCancelled               `Runtime.wait` on a run that was cancelled
    ├── WaitTimeout                `Runtime.wait` gave up before the run finished
    ├── NondeterminismError        the workflow's code no longer matches the run's log
    ├── LogFormatUnknown           the run's log was recorded by a newer Parley than this one
    └── StoreUnavailable           the store (Redis) cannot be reached now; retry later
        └── ReplicationUnconfirmed the master wrote it, no replica confirmed it in time
"""

from __future__ import annotations

__all__ = [
    "ChildFailed",
    "EventLimitExceeded",
    "HookAlreadyAnswered",
    "HookCancelled",
    "HookClosed",
    "HookExpired",
    "HookNotFound",
    "HookTimeout",
    "InvalidLink",
    "InvalidPayload",
    "InvalidTag",
    "InvalidToken",
    "LeaseLost",
    "LogFormatUnknown",
    "MessageTimeout",
    "NondeterminismError",
    "ParleyError",
    "PayloadTooLarge",
    "ReplicationUnconfirmed",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunNotFound",
    "StepFailed",
    "StoreUnavailable",
    "UsageError",
    "WaitTimeout",
    "WorkflowNotFound",
]


class ParleyError(Exception):
    """Root of every error Parley raises on purpose.

    ``code`` is a stable machine-readable identifier (used as the ``error`` field
    of HTTP/websocket error responses).
    """

    code = "parley_error"

    def __init__(
        self, message: str, *, run_id: str | None = None, hook_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.run_id = run_id
        self.hook_id = hook_id

    def __str__(self) -> str:
        where = []
        if self.run_id is not None:
            where.append(f"run={self.run_id}")
        if self.hook_id is not None:
            where.append(f"hook={self.hook_id}")
        return f"{self.message} ({', '.join(where)})" if where else self.message


class UsageError(ParleyError):
    code = "usage_error"


class WorkflowNotFound(UsageError):
    code = "workflow_not_found"


class LogFormatUnknown(ParleyError):
    """The run's log was recorded in a form this version of Parley cannot replay (a newer
    one started the run): it is left for a worker that can, not replayed wrongly."""

    code = "log_format_unknown"

    def __init__(self, message: str, *, run_id: str, log_format: object, newest: int) -> None:
        super().__init__(message, run_id=run_id)
        self.log_format = log_format
        self.newest = newest


class InvalidTag(UsageError):
    """A tag key or value that is not allowed (see :mod:`runtime.tags`)."""

    code = "invalid_tag"


class InvalidToken(ParleyError):
    code = "invalid_token"


class InvalidLink(ParleyError):
    """An answer link this server cannot accept; ``reason`` says why: ``malformed``,
    ``unknown_key`` (signed with a key it does not have), ``bad_signature`` (altered) or
    ``expired``."""

    code = "invalid_link"

    def __init__(
        self,
        message: str,
        reason: str,
        *,
        run_id: str | None = None,
        hook_id: str | None = None,
    ) -> None:
        super().__init__(message, run_id=run_id, hook_id=hook_id)
        self.reason = reason


class InvalidPayload(ParleyError):
    code = "invalid_payload"


class PayloadTooLarge(InvalidPayload):
    code = "payload_too_large"


class RunNotFound(ParleyError):
    code = "run_not_found"


class RunFinished(ParleyError):
    code = "run_finished"


class HookNotFound(ParleyError):
    code = "hook_not_found"


class HookAlreadyAnswered(ParleyError):
    code = "hook_already_answered"


class HookExpired(ParleyError):
    code = "hook_expired"


class HookCancelled(HookExpired):
    code = "hook_cancelled"


class HookClosed(HookExpired):
    code = "hook_closed"


class HookTimeout(ParleyError):
    code = "hook_timeout"


class MessageTimeout(ParleyError):
    code = "message_timeout"


class EventLimitExceeded(ParleyError):
    code = "event_limit_exceeded"


class LeaseLost(ParleyError):
    code = "lease_lost"


class StepFailed(ParleyError):
    code = "step_failed"

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        step_id: str | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.step_id = step_id
        self.error_type = error_type


class ChildFailed(ParleyError):
    code = "child_failed"

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        child_run_id: str | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.child_run_id = child_run_id
        self.error_type = error_type


class RunFailed(ParleyError):
    code = "run_failed"


class RunCancelled(ParleyError):
    code = "run_cancelled"


class WaitTimeout(ParleyError):
    code = "wait_timeout"


class StoreUnavailable(ParleyError):
    """The store could not be reached (connection refused or lost, a timeout). Nothing is
    known to have changed: the caller may retry once the store is back."""

    code = "store_unavailable"


class StoreReset(StoreUnavailable):
    """The store came back without its state (Redis restarted empty, a failover to an empty
    replica, the consumer group evicted). What a worker needs was re-created (the task
    groups); the caller should restore what it keeps there (its workflow announcements)
    and go on."""

    code = "store_reset"


class ReplicationUnconfirmed(StoreUnavailable):
    """A store URL with ``?wait=N``: the master applied the write but fewer than N replicas
    confirmed it within the wait timeout, so it was not acknowledged. Its fate is unknown:
    it may be lost if the master fails now, or survive. Retrying is safe (an answer sent
    again is recognised as the same answer; a start with an idempotency key starts once)."""

    code = "replication_unconfirmed"


class NondeterminismError(ParleyError):
    """A durable call of the workflow does not match what the run's log recorded at that
    position (a step swapped, renamed, inserted or removed while the run waited). The run
    is not failed: it is blocked until a worker with matching code retries it."""

    code = "nondeterminism"

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        position: str | int | None = None,
        recorded: str | None = None,
        now: str | None = None,
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.position = position
        self.recorded = recorded
        self.now = now

    def to_json(self) -> dict[str, object]:
        return {
            "type": type(self).__name__,
            "code": self.code,
            "message": self.message,
            "position": self.position,
            "recorded": self.recorded,
            "now": self.now,
        }


def outage(exc: BaseException) -> StoreUnavailable | None:
    """The store outage behind ``exc``, if any: ``exc`` itself, or what it was raised from
    or during (user code that wrapped a ``StoreUnavailable`` in its own error). (Not an
    error class, so not in ``__all__``: the engine and tracing read it.)"""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, StoreUnavailable):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None

"""How an execution ends a run: completed, continued as a new run, failed or blocked.

:class:`Endings` is a base class of :class:`~runtime.engine.execution.Execution`: each end
records its event and the session's status message in the execution's buffered writes and
sends them with the end of the run in one fenced store call (:meth:`Writer._apply`).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from .. import _faults
from .._codec import dumps, encode_value
from ..errors import EventLimitExceeded, NondeterminismError
from ..models import EventType, RunStatus
from ..registry import WorkflowDef
from ..store import Finish
from .continuing import successor_input
from .failures import describe_error, public_error
from .messages import PassMessages
from .signals import ContinueAsNew
from .writer import Writer

log = logging.getLogger("parley.execution")  # the execution's logger, as before the split


class Endings(Writer):
    workflow: WorkflowDef
    session: str | None
    parent: str | None
    outcome: str
    messages: PassMessages

    async def _finish_completed(self, result: Any) -> None:
        try:
            encoded = encode_value(
                result,
                what="workflow result",
                limit=self.limits.max_payload_bytes,
                run_id=self.run_id,
            )
        except Exception as exc:
            await self.finish_failed(exc)
            return
        self.record_encoded(
            EventType.WORKFLOW_COMPLETED, b'{"result":' + encoded + b"}", {"result": None}
        )
        self.post_status(RunStatus.COMPLETED)
        notify = self._child_end(RunStatus.COMPLETED, result=orjson.Fragment(encoded))
        try:
            await self._apply(finish=Finish(RunStatus.COMPLETED, encoded, notify))
        except EventLimitExceeded as exc:
            await self.finish_failed(exc)
            return
        self.outcome = "completed"
        _faults.crash_point("after_final_event")

    async def _finish_continued(self, signal: ContinueAsNew) -> None:
        """End the run as ``continued``: its successor (id derived from this run's, same
        partition, session and tags) is created, enqueued and made the session's active
        run in the same atomic write; this run's pending hooks close like at any end."""
        next_id = self.store.continued_run_id(self.run_id, self.index.origin)
        limit = self.limits.max_payload_bytes
        try:
            started, tags = successor_input(
                signal, self.index.tags, self.index.trace, limit, self.run_id
            )
        except Exception as exc:
            await self.finish_failed(exc)
            return
        # Race closed: messages sent to the conversation and not received yet (left in the
        # log by a withdrawn receive, or just delivered) ended with this run, unread,
        # though their sends had been accepted. They go on to the successor's receives.
        leftovers = [
            dumps({"payload": self.index.messages[topic][n], "topic": topic})
            for topic, n in self.messages.untaken(self.index)
        ]
        self.writes.continue_as(next_id, self.workflow.name, started, tags, leftovers)
        self.record(EventType.WORKFLOW_CONTINUED, {"continued_to": next_id})
        self.post_status(RunStatus.CONTINUED, continued_to=next_id)
        try:
            await self._apply(finish=Finish(RunStatus.CONTINUED, dumps({"continued_to": next_id})))
        except EventLimitExceeded as exc:
            await self.finish_failed(exc)
            return
        self.outcome = "continued"

    async def finish_failed(self, exc: BaseException) -> None:
        error = describe_error(exc, self.run_id)
        log.info("run failed: %s", error["message"], extra={"run_id": self.run_id})
        self.record(EventType.WORKFLOW_FAILED, {"error": error})
        self.post_status(RunStatus.FAILED, error=public_error(error))
        notify = self._child_end(RunStatus.FAILED, error=error)
        await self._apply(finish=Finish(RunStatus.FAILED, dumps(error), notify), event_slack=16)
        self.outcome = "failed"
        _faults.crash_point("after_final_event")

    def _child_end(self, status: RunStatus, **outcome: Any) -> bytes | None:
        """What the parent's log records when this run (started by child()) ends."""
        if self.parent is None:
            return None
        return orjson.dumps({"child_run_id": self.run_id, "status": status.value, **outcome})

    async def _block(self, error: NondeterminismError) -> None:
        """Park the run, untouched, until code that matches its log retries it."""
        log.error("run blocked: %s", error.message, extra={"run_id": self.run_id})
        described = error.to_json()
        self.record(EventType.WORKFLOW_BLOCKED, {"error": described})
        await self._apply(finish=Finish(RunStatus.BLOCKED, dumps(described)), event_slack=16)
        self.outcome = "blocked"

    def post_status(self, status: RunStatus, **extra: Any) -> None:
        if self.session:
            self.writes.post(
                dumps({"type": "status", "status": status.value, "run_id": self.run_id, **extra})
            )

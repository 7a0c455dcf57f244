"""Replaying a recorded history against the current code, without writing anything: what
``parley replay`` runs in CI to check a deploy against real waiting runs.

The workflow body is replayed from the run's log; a durable call that does not match
what the log recorded at its position is a mismatch. Nothing runs that the log does not
cover: the replay stops at the first step without a recorded result (its body is not
run), at the run's current wait, or where the recorded history ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from ..models import Event
from ..registry import WorkflowDef
from ..settings import Limits
from ..store import Claim, ClaimStatus, Store
from .execution import Execution
from .signals import Blocked, ReplayEnded


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """``mismatch`` is None when the code matches the history; ``stopped`` says where the
    replay ended."""

    run_id: str
    workflow: str
    stopped: str
    mismatch: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.mismatch is None


class _NoWrites:
    """The store of a dry replay: an execution that tries to write has left the history
    (see Execution._apply, which ends a dry replay before any write)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a dry replay called the store ({name})")


async def replay(
    workflow: WorkflowDef,
    run_id: str,
    events: list[Event],
    checkpoints: dict[str, bytes] | None = None,
) -> ReplayReport:
    claim = Claim(ClaimStatus.OK, events=events, checkpoints=checkpoints or {})
    execution = Execution(
        cast(Store, _NoWrites()),
        run_id,
        workflow,
        claim,
        limits=Limits(),
        retention_seconds=1,
        dry_run=True,
    )
    try:
        await execution.run()
    except Blocked as blocked:
        return ReplayReport(run_id, workflow.name, "mismatch", blocked.error.to_json())
    except ReplayEnded as ended:
        return ReplayReport(run_id, workflow.name, ended.where)
    return ReplayReport(run_id, workflow.name, "the workflow returned")

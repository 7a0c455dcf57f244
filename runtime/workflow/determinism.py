"""What a replay could not otherwise see, made replayable: ``patched`` (branching on a
code change), and the clock, random numbers and uuids recorded in the run's log.

The workflow body is replayed from the top on every resume, so it must make the same
durable calls in the same order each time. Read the clock, draw random numbers and make
uuids through these (in the body: recorded once, replayed after), or inside steps (whose
results are recorded). Change a workflow's calls under runs that may still be waiting
only behind ``patched``.
"""

from __future__ import annotations

import random as _random
import uuid
from datetime import UTC, datetime
from typing import Any

from ..engine.execution import Execution, current_execution
from ..engine.signals import current_step
from ..errors import UsageError
from ..ids import check_name
from ..models import EventType

__all__ = ["now", "patched", "random", "uuid4"]


def _execution(what: str) -> Execution:
    execution = current_execution.get()
    if execution is None:
        raise UsageError(f"{what} can only be used while a workflow runs on a worker")
    return execution


def patched(patch_id: str) -> bool:
    """True where the run takes the code's new path, False where it recorded the old one.

    In the workflow body: True for new runs and for runs whose log has not yet reached
    this point; False for runs that went past it on the code before the patch. Inside a
    step (which re-executes from its checkpoint, not from the log): True when the code
    that began the step had the patch, False when the step began on older code; give the
    id as a string literal (``patched("new-pricing")``), which is how a step knows its
    patches when it starts. The answer is recorded (``patch.marked``), so every later
    replay answers the same. Retire a patch by removing the call and the old branch once
    no run that took the old path is left (``parley runs list``).
    """
    check_name(patch_id, "patch")
    execution = _execution("patched()")
    scope = current_step.get()
    step_id = None if scope is None else scope.step_id
    if (patch_id, step_id) in execution.index.patches:
        return True
    if scope is None:
        if execution.went_past():
            return False
    elif execution.begun_before(scope.step_id):
        return patch_id in execution.index.step_patches.get(scope.step_id, frozenset())
    marker: dict[str, Any] = {"patch": patch_id}
    if step_id is not None:
        marker["step_id"] = step_id
    execution.record(EventType.PATCH_MARKED, marker)
    return True


def _recorded(kind: str, make: Any) -> Any:
    execution = _execution(f"{kind}()")
    if current_step.get() is not None:
        return make()  # a step's result is recorded, not its inside: nothing to replay
    position, recorded = execution.check_call(kind)
    if recorded is not None:
        return recorded.value
    value = make()
    execution.record(EventType.VALUE_RECORDED, {"seq": position, "kind": kind, "value": value})
    return value


def now() -> datetime:
    """The current time (UTC), recorded: a replay of the workflow sees the same instant."""
    execution = _execution("now()")
    return datetime.fromtimestamp(_recorded("now", execution.now_ms) / 1000, UTC)


def random() -> float:
    """A random float in [0, 1), recorded: a replay of the workflow draws the same one."""
    value: float = _recorded("random", _random.random)
    return value


def uuid4() -> uuid.UUID:
    """A random UUID, recorded: a replay of the workflow makes the same one."""
    return uuid.UUID(_recorded("uuid4", lambda: str(uuid.uuid4())))

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

from .._clock import now_ms
from ..engine.execution import Execution, current_execution, current_step
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

    Call it in the workflow body: True for new runs and for runs whose log has not yet
    reached this point; False for runs that went past it on the code before the patch.
    The answer is recorded (a ``patch.marked`` event), so every later replay of the run
    answers the same. To change what a step does, choose between the old and the new
    step with ``patched`` (a run waiting inside the old step finishes in it). Retire a
    patch by removing the call and the old branch once no run that took the old path is
    left (``parley runs list``): runs that recorded the marker replay fine without it.
    """
    check_name(patch_id, "patch")
    execution = _execution("patched()")
    if current_step.get() is not None:
        raise UsageError(
            "patched() is for the workflow body: choose between an old and a new step with "
            "it (a step re-executes from its checkpoint, not from the log)",
            run_id=execution.run_id,
        )
    if (patch_id, None) in execution.index.patches:
        return True
    if execution.passed(execution.position):
        return False
    execution.record(EventType.PATCH_MARKED, {"patch": patch_id})
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
    return datetime.fromtimestamp(_recorded("now", now_ms) / 1000, UTC)


def random() -> float:
    """A random float in [0, 1), recorded: a replay of the workflow draws the same one."""
    value: float = _recorded("random", _random.random)
    return value


def uuid4() -> uuid.UUID:
    """A random UUID, recorded: a replay of the workflow makes the same one."""
    return uuid.UUID(_recorded("uuid4", lambda: str(uuid.uuid4())))

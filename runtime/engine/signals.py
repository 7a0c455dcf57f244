"""The control-flow signals that unwind a workflow to the worker, and the scope of the
step being executed."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ParleyError


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
    """Unwinds the workflow to the worker without writing anything more (lease lost, the
    store unreachable, a write interrupted)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class StepScope:
    step_id: str
    name: str
    hook_counters: dict[str, int] = field(default_factory=dict)

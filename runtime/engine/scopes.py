"""The numbering of a workflow's durable calls by the task that makes them.

Replay matches each durable call (a step, a hook, a sleep, a child...) with the one the log
recorded at its position, and a call's ids (its step id, hook id, timer id) come from the
same counters. Counted across the whole run, positions followed the tasks' scheduling: in
``gather(a_then_b(), c())`` the first pass reached ``a``, ``c``, then ``b`` (``a`` took
time), a replay, where ``a``'s recorded result returns at once, reached ``a``, ``b``, then
``c``, and the run was blocked as nondeterministic (or took another call's result).

So each task of the workflow counts its own calls. The workflow body's task is the root
scope: positions 0, 1, 2... and ids as they always were. A task it creates gets a child
scope named by where its creator was: the creator's number of calls so far and how many
tasks it had created since its last call (``"2_0."``: the first task created after two
calls); its positions and ids carry that prefix (``"2_0.0"``, ``"2_0.h0.approve"``). Both
numbers come from the creator's own code, so they are the same on every replay, however
the tasks interleave.

Tasks a step's body creates are the step's, not numbered (a step with a recorded result
does not run). A task created between two durable calls must be created the same way on
every pass, like every call of a workflow body: I/O there (which belongs in steps) can
make tasks of its own; the store's own calls run in contexts of their own.

Runs whose log does not say so (started before this numbering: no ``scoped`` in their
workflow.started) keep one scope for all their tasks, as they were recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar

# A durable call's position: an int in the workflow body's own task, a string in a task it
# created (the task's prefix, then its own count).
Position = int | str

# The scope of the running task, while an execution runs its workflow.
current_scope: ContextVar[CallScope | None] = ContextVar("parley_call_scope", default=None)


class CallScope:
    """One task's counters: its durable calls, the tasks it created since its last one, and
    the ids of its steps, hooks and timers."""

    __slots__ = ("calls", "hooks", "prefix", "spawns", "steps", "timers")

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix  # "" for the workflow body's task
        self.calls = 0
        self.spawns = 0  # tasks created since the last call
        self.steps: dict[str, int] = {}
        self.hooks = 0
        self.timers = 0

    def next_position(self) -> Position:
        n = self.calls
        self.calls = n + 1
        self.spawns = 0
        return f"{self.prefix}{n}" if self.prefix else n

    def child(self) -> CallScope:
        """The scope of a task this one creates now."""
        scope = CallScope(f"{self.prefix}{self.calls}_{self.spawns}.")
        self.spawns += 1
        return scope

    def step_id(self, name: str) -> str:
        n = self.steps.get(name, 0)
        self.steps[name] = n + 1
        return f"{self.prefix}{name}-{n}"

    def hook_id(self, name: str) -> str:
        n = self.hooks
        self.hooks += 1
        return f"{self.prefix}h{n}.{name}"

    def timer_id(self) -> str:
        n = self.timers
        self.timers += 1
        return f"{self.prefix}t{n}"

    def went_past(self, recorded: Iterable[Position]) -> bool:
        """Whether any of the ``recorded`` positions is at or after where this scope is now:
        one of its own calls from its next on, or a call of a task it creates from now on
        (not of one it made already since its last call, as a gather just before)."""
        n, prefix = self.calls, self.prefix
        for position in recorded:
            if isinstance(position, int):
                if not prefix and position >= n:
                    return True
                continue
            if not position.startswith(prefix):
                continue
            rest = position[len(prefix) :]
            if "." not in rest:  # one of its own calls
                if int(rest) >= n:
                    return True
                continue
            made_at, _, spawn = rest.split(".", 1)[0].partition("_")
            if int(made_at) > n or (int(made_at) == n and int(spawn) >= self.spawns):
                return True
        return False


def position_of(seq: object) -> Position:
    """A position as an event's ``seq`` recorded it (an int, or a task's string)."""
    return seq if isinstance(seq, str) else int(seq)  # type: ignore[call-overload]

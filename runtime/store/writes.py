"""The writes of one execution, built by typed calls and applied by the store in one
fenced, atomic step (:meth:`runtime.store.Store.apply`).

The engine buffers what an execution records — events, checkpoint changes, hook
creations, deadlines, session messages — and hands the whole batch to the store at the
next durable point, so a HITL lifecycle costs a handful of round trips. This class is the
only producer of that batch; each store backend is its only reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..models import EventType

# An op is a list whose first item names it, then strings: the form a backend sends as
# it is; only a hook's op holds its HookSpec, which the backend encodes its own way.
Op = list[Any]


class HookSpec(NamedTuple):
    """A hook to create: its id, its token, its metadata (name, step id, expiry, prompt,
    schema) and whether answers are validated against the schema. (A tuple: made for each
    hook asked, where a frozen dataclass's ``__init__`` costs ~3x as much.)"""

    hook_id: str
    token: str
    meta: dict[str, Any]
    validated: bool
    expires_at_ms: int | None


# Each event type's plain string: looked up on every event recorded, where the enum's
# ``value`` property costs two Python calls (~1k instructions each event, bench.engine).
_TYPE_NAMES: dict[EventType, str] = {member: member.value for member in EventType}


class Writes:
    """An ordered batch of writes to one run."""

    __slots__ = ("data_bytes", "event_count", "ops")

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.event_count = 0
        self.data_bytes = 0  # of the events' data

    def __bool__(self) -> bool:
        return bool(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:
        return f"<Writes {[op[0] for op in self.ops]}>"

    def event(self, event_type: EventType, data: bytes) -> None:
        """Append an event (``data``: its JSON object) to the run's log."""
        self.ops.append(["event", _TYPE_NAMES[event_type], data.decode()])
        self.event_count += 1
        self.data_bytes += len(data)

    def save_checkpoint(self, step_id: str, state: bytes) -> None:
        self.ops.append(["checkpoint", step_id, state.decode()])

    def delete_checkpoint(self, step_id: str) -> None:
        self.ops.append(["uncheckpoint", step_id])

    def create_hook(self, hook: HookSpec) -> None:
        """Record a pending hook, index it as pending and, with an expiry, schedule its
        deadline. For a hook recorded already: its record and deadline are replaced while
        it is still pending (asked again with a fresh deadline), else left as they are."""
        self.ops.append(["hook", hook])

    def asking(self, hook_id: str, due_ms: int) -> None:
        """The pending hook's ``on_created`` is to run: until :meth:`asked`, its deadline
        (``due_ms``) does not expire it, so nobody loses the chance to be asked when the
        worker dies before it asked."""
        self.ops.append(["asking", hook_id, str(due_ms)])

    def asked(self, hook_id: str) -> None:
        """The hook's ``on_created`` returned: its deadline counts again (a deadline that
        passed meanwhile expires it at once)."""
        self.ops.append(["asked", hook_id])

    def schedule_timer(self, timer_id: str, due_ms: int) -> None:
        """A durable timer of the run (a sleep or a retry backoff); several may be pending
        at once (sleeps in parallel branches), and the run's end withdraws them all."""
        self.ops.append(["timer", timer_id, str(due_ms)])

    def close_hook(self, hook_id: str, token: str) -> None:
        """Withdraw a pending hook (another wait finished first): it takes no answer, its
        deadline goes, and the run's session is told."""
        self.ops.append(["close_hook", hook_id, token])

    def join_first(self, wait_id: str, group: str) -> None:
        """The hook or timer ``wait_id``, just created, is a branch of the first() that
        ``group`` names (unique in the run): the first of the group's waits to finish (a
        hook answered or expired, a timer fired) makes the store refuse its other hooks'
        answers from then on, until :meth:`first_group` withdraws them."""
        self.ops.append(["join_first", wait_id, group])

    def first_group(self, wait_ids: list[str]) -> None:
        """Hooks and timers that one first() waits on: the first answered, expired or fired
        withdraws the other hooks in the same step as its answer, expiry or firing."""
        self.ops.append(["first_group", "=" + ",".join(wait_ids)])

    def cancel_child(self, run_id: str) -> None:
        """Cancel the child run ``run_id`` (and its own children), whose branch lost a
        first(): its pending hooks are withdrawn, and this run is not told it ended."""
        self.ops.append(["cancel_child", run_id])

    def cancel_timer(self, timer_id: str) -> None:
        """Remove a timer that no longer matters (another wait finished first)."""
        self.ops.append(["cancel_timer", timer_id])

    def start_child(self, run_id: str, workflow: str, started: bytes) -> None:
        """Create the child run ``run_id`` (once) with its workflow.started data, enqueued,
        and link it to this run."""
        self.ops.append(["start_child", run_id, workflow, started.decode()])

    def continue_as(
        self,
        run_id: str,
        workflow: str,
        started: bytes,
        tags: bytes | None = None,
        messages: Sequence[bytes] = (),
    ) -> None:
        """Create the run ``run_id`` (once) that continues this one (continue_as_new): its
        workflow.started data, its tags (JSON), this run's session, which follows it;
        enqueued, and linked both ways. ``messages``: the message.received data of those
        in this run's log that no receive kept, oldest first; they wait in the new run's
        inbox, before the messages this run's inbox holds."""
        self.ops.append(
            [
                "continue",
                run_id,
                workflow,
                started.decode(),
                (tags or b"").decode(),
                [message.decode() for message in messages],
            ]
        )

    def receive(self, topic: str) -> None:
        """(In a suspension) take the run's oldest buffered message of ``topic`` into its
        log, or have the next one sent delivered to the log directly."""
        self.ops.append(["receive", topic])

    def stop_receiving(self, topic: str) -> None:
        """Messages of ``topic`` sent from now on wait in the inbox again."""
        self.ops.append(["unreceive", topic])

    def post(self, message: bytes) -> None:
        """A message to the run's chat session (ignored when the run has none)."""
        self.ops.append(["post", message.decode()])

    def prompt(self, message: bytes) -> None:
        """A hook's prompt to the run's chat session: it keeps the session's messages from
        expiring while the hook is pending."""
        self.ops.append(["prompt", message.decode()])

    def set_tags(self, tags: bytes) -> None:
        """Replace the run's tags (``tags``: the JSON object of all of them) and move the
        run in the tag index: out of the tags it lost, into the ones it gained."""
        self.ops.append(["tags", tags.decode()])

    def take(self) -> Writes:
        """Move the buffered writes into a new batch and start empty."""
        taken = Writes()
        taken.ops, self.ops = self.ops, []
        taken.event_count, self.event_count = self.event_count, 0
        taken.data_bytes, self.data_bytes = self.data_bytes, 0
        return taken

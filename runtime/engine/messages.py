"""Which message of its topic each receive of one pass of a workflow takes.

Messages of a topic are kept in the log in the order they came. In a run of
``models.LOG_TAKES`` each receive records the number of the message it took
(``message.taken``) and takes that one again in every later pass; a receive the log says
nothing of takes the first message no other receive took, recorded or in this pass. Race
closed: tasks reach their receives in another order in a replay (a step that ran in one
pass returns at once in the next), so a message one receive had taken and handled went to
another, and was handled again. Runs recorded before replay as they ran: the n-th receive
of a topic reached in a pass takes its n-th message.

A receive that a first() withdrew (its timeout came first) takes none, unless its branch
had used the message (handed it to a step); the message it gives back goes to the next
receive of its topic.
"""

from __future__ import annotations

from collections.abc import Sequence

from .replay import ReplayIndex


class PassMessages:
    """The message numbers the receives of the current pass took, by topic."""

    __slots__ = ("_by_order", "_freed", "_next", "_numbers", "_taken")

    def __init__(self) -> None:
        # topic -> where the search for its next free number starts (or, in a run recorded
        # before receives recorded their messages, the number its next receive takes)
        self._next: dict[str, int] = {}
        self._taken: dict[str, tuple[str, int]] = {}  # receive -> (topic, message number)
        self._numbers: dict[str, set[int]] = {}  # topic -> the numbers this pass took
        self._freed: dict[str, set[int]] = {}  # topic -> numbers given back in this pass
        self._by_order = False

    def clear(self, index: ReplayIndex) -> None:
        """A new pass over the run recorded in ``index``."""
        self._next.clear()
        self._taken.clear()
        self._numbers.clear()
        self._freed.clear()
        self._by_order = not index.takes

    def take(self, topic: str, wait: str, index: ReplayIndex) -> int:
        """The number of the message of ``topic`` the receive ``wait`` takes."""
        if self._by_order:
            n = self._next.get(topic, 0)
            self._next[topic] = n + 1
        else:
            recorded = index.assigned.get(wait)
            n = self._free(topic, index) if recorded is None else recorded[1]
            self._numbers.setdefault(topic, set()).add(n)
        self._taken[wait] = (topic, n)
        return n

    def _free(self, topic: str, index: ReplayIndex) -> int:
        """The first number of ``topic`` that no receive took, recorded or in this pass:
        the search's next, or one given back (every number the search passed was taken
        then; those given back since are free again)."""
        n = self._next.get(topic, 0)
        recorded = index.assigned_of.get(topic, ())
        numbers = self._numbers.get(topic, ())
        while n in recorded or n in numbers:
            n += 1
        freed = self._freed.get(topic)
        if freed:
            if min(freed) < n:
                n = min(freed)
                freed.discard(n)
                return n
            # Race closed: the search found a number given back (no longer recorded nor
            # taken), and the next receive took it again from those given back.
            freed.discard(n)
        self._next[topic] = n + 1
        return n

    def unread(self, topic: str, waiting: Sequence[str], index: ReplayIndex) -> bool:
        """Whether the log holds a message of ``topic`` that the receives ``waiting``
        (suspended in this pass) could take: the one a receive was to take came after it
        took its number (a later write of the pass brought it back), or one no receive
        holds (given back since)."""
        received = len(index.messages.get(topic, ()))
        if self._by_order:
            # Where a pass run again would count a suspended receive to: its rank among this
            # pass's takes of the topic (in the order they were reached; those given back
            # take none). Race closed: "the suspended receives took the last numbers" missed
            # a message when a receive that kept its number came after them (a losing one,
            # in decisions recorded before they listed their receives).
            rank, suspended = 0, set(waiting)
            for wait, (taken_topic, _) in self._taken.items():
                if taken_topic == topic:
                    if wait in suspended and rank < received:
                        return True
                    rank += 1
            return False
        if any(self._taken[wait][1] < received for wait in waiting if wait in self._taken):
            return True
        # Below where the search got to, every number was taken then: those given back
        # since are free; above it, any that nothing took.
        if any(n < received for n in self._freed.get(topic, ())):
            return True
        numbers = self._numbers.get(topic, ())
        recorded = index.assigned_of.get(topic, ())
        return any(
            n not in numbers and n not in recorded
            for n in range(self._next.get(topic, 0), received)
        )

    def untaken(self, index: ReplayIndex) -> list[tuple[str, int]]:
        """The messages in the log that no receive holds, recorded or in this pass (none
        took them yet, or a withdrawn receive gave them back), as (topic, number) in the
        order they came within each topic: what a run that continues as new hands on."""
        untaken: list[tuple[str, int]] = []
        for topic, received in index.messages.items():
            if self._by_order:
                untaken.extend((topic, n) for n in range(self._next.get(topic, 0), len(received)))
                continue
            held = index.assigned_of.get(topic, set()) | self._numbers.get(topic, set())
            freed = self._freed.get(topic, set())
            untaken.extend((topic, n) for n in range(len(received)) if n in freed or n not in held)
        return untaken

    def took(self, wait: str) -> bool:
        """Whether ``wait`` is a receive that took a message number in this pass."""
        return wait in self._taken

    def came_at(self, wait: str, index: ReplayIndex) -> tuple[int, int] | None:
        """When the message the receive ``wait`` took came, if it has come: the end of that
        wait, which a first() compares with its other waits' ends."""
        taken = self._taken.get(wait)
        if taken is None:
            return None
        topic, n = taken
        arrived = index.message_at.get(topic, ())
        return arrived[n] if n < len(arrived) else None

    def give_back(self, wait: str) -> None:
        """The receive ``wait`` was withdrawn by a first() decided in this pass: it takes no
        message after all, as in every later pass (where a withdrawn receive takes none),
        so the next receive of its topic takes the one it had. (In a run recorded before
        receives recorded their messages, the count of its topic goes one back, as it did
        when that run was recorded. Race closed in the others: that count went back from
        wherever it was, so the next receive skipped the message given back, and the run
        waited for another with it unread in the log.)"""
        taken = self._taken.pop(wait, None)
        if taken is None:
            return
        topic, n = taken
        if self._by_order:
            self._next[topic] -= 1
            return
        self._numbers[topic].discard(n)
        self._freed.setdefault(topic, set()).add(n)

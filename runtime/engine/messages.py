"""Which message of its topic each receive of one pass of a workflow takes.

Messages of a topic are kept in the log in the order they came; the receives of a pass
take them in the order the receives are reached: the n-th receive of a topic takes its
n-th message. A receive that a first() withdrew (its timeout came first) takes none, unless
its branch had used the message (handed it to a step).
"""

from __future__ import annotations

from .replay import ReplayIndex


class PassMessages:
    """The message numbers the receives of the current pass took, by topic."""

    __slots__ = ("_counts", "_taken")

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}  # topic -> how many of its receives took one
        self._taken: dict[str, tuple[str, int]] = {}  # receive -> (topic, message number)

    def clear(self) -> None:
        self._counts.clear()
        self._taken.clear()

    def take(self, topic: str, wait: str) -> int:
        """The number of the message of ``topic`` the receive ``wait`` takes."""
        n = self._counts.get(topic, 0)
        self._counts[topic] = n + 1
        self._taken[wait] = (topic, n)
        return n

    def taken(self, topic: str) -> int:
        """How many messages of ``topic`` this pass's receives took."""
        return self._counts.get(topic, 0)

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
        so the next receive of its topic takes the one it had."""
        taken = self._taken.pop(wait, None)
        if taken is not None:
            self._counts[taken[0]] -= 1

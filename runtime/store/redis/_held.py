"""The logs of the runs this process executes, entry by entry as Redis holds them, so
that a run which ends here is archived (``._compaction``) from what the process already
has instead of reading its log and hooks back: two commands per finished run fewer
(``XRANGE`` and ``HGETALL``), and their replies neither sent nor parsed.

A run's entries are gathered from its claims (the whole log, or the tail after what the
process held) and from its APPLYs (the events others appended meanwhile, as the script
read them, then the APPLY's own, with the ids the script returns). Each is checked
against the run's own count of events; whatever does not add up (a tail with nothing
held before it, a count that differs, a write whose outcome is unknown) drops the run,
and its compaction then reads the log as before. Held entries are per lease (the fence):
a zombie execution's replies cannot touch the log its successor holds. The archive's swap
is fenced by the log's length and the hooks' count whichever way it was built
(``lua/compact.lua``), and a held log it refuses is read and swapped again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

# [id, [b"t", type, b"d", data]]: a stream entry as XRANGE inside a script returns it
Entry = list[Any]

# Runs held, and the bytes they take in all (an estimate: each entry's data plus what its
# Python objects cost beside it, ~250 bytes, measured with tracemalloc). The runs are the
# bound of the worker's replay cache (runtime/engine/replay_cache.py), whose hits are the
# claims that return a tail only; the bytes keep long logs and large payloads from holding
# more than that, whatever the events count.
HELD_RUNS = 512
HELD_BYTES = 32 * 1024 * 1024
ENTRY_OVERHEAD = 250


def _size(entries: Sequence[Entry]) -> int:
    return sum(len(entry[1][3]) for entry in entries) + ENTRY_OVERHEAD * len(entries)


class HeldLogs:
    """A bounded LRU of run id -> (fence, entries, their size)."""

    def __init__(self, runs: int = HELD_RUNS, max_bytes: int = HELD_BYTES) -> None:
        self.runs = runs
        self.max_bytes = max_bytes
        self.bytes = 0
        self._logs: OrderedDict[str, tuple[str, list[Entry], int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._logs)

    def claimed(
        self, run_id: str, fence: str, entries: list[Entry], *, tail: bool, count: int
    ) -> None:
        """A claim's log (``tail``: the entries after the ``count - len(entries)`` the
        process knew); ``count`` is the run's."""
        held = self._pop(run_id)
        if tail:
            if held is None or len(held[1]) + len(entries) != count:
                return
            log, size = held[1], held[2]
            log.extend(entries)
        else:
            if len(entries) != count:
                return
            log, size = list(entries), 0
        self._keep(run_id, fence, log, size + _size(entries))

    def applied(
        self,
        run_id: str,
        fence: str,
        known: int | None,
        after: str,
        arrived: Sequence[Entry],
        own: Sequence[Entry],
    ) -> None:
        """An APPLY's reply under lease ``fence``: the execution knew ``known`` events
        before it, up to ``after``; others appended ``arrived``, it appended ``own``."""
        held = self._logs.get(run_id)
        if held is None or held[0] != fence:
            return  # another lease's, or nothing held
        self._pop(run_id)
        log = held[1]
        if known is None or len(log) != known or (log and log[-1][0] != after.encode()):
            return
        log.extend(arrived)
        log.extend(own)
        self._keep(run_id, fence, log, held[2] + _size(arrived) + _size(own))

    def take(self, run_id: str, fence: str) -> list[Entry] | None:
        """The run's entries, no longer held (it ended), if held under ``fence``."""
        held = self._logs.get(run_id)
        if held is None or held[0] != fence:
            return None
        self._pop(run_id)
        return held[1]

    def drop(self, run_id: str, fence: str) -> None:
        """Forget the run's entries held under ``fence`` (the write's outcome is unknown,
        or the lease was lost)."""
        held = self._logs.get(run_id)
        if held is not None and held[0] == fence:
            self._pop(run_id)

    def _pop(self, run_id: str) -> tuple[str, list[Entry], int] | None:
        held = self._logs.pop(run_id, None)
        if held is not None:
            self.bytes -= held[2]
        return held

    def _keep(self, run_id: str, fence: str, log: list[Entry], size: int) -> None:
        if size > self.max_bytes:
            return
        self._logs[run_id] = (fence, log, size)
        self.bytes += size
        while len(self._logs) > self.runs or self.bytes > self.max_bytes:
            _, (_, _, evicted) = self._logs.popitem(last=False)
            self.bytes -= evicted

"""What a worker remembers of the runs it executed recently, so that resuming one costs
the same at round 1,000 as at round 1.

After an execution that suspended cleanly (its every write applied), its
:class:`~runtime.engine.replay.ReplayIndex` is exactly the index of the run's log up to
the last event it wrote or saw. The worker keeps it with that
:class:`~runtime.store.KnownLog`; its next claim of the run passes the KnownLog and the
store returns only the events after it — or, when the log no longer extends it (history
rewritten, or the proof otherwise fails), the whole log, and the index is rebuilt.
Another worker having advanced the run meanwhile is no reason to discard it: the log is
append-only, so its events simply arrive in the tail.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..registry import WorkflowDef
from ..store import KnownLog
from .replay import ReplayIndex

# Runs remembered per worker, the events their indexes may reflect in all, and the bytes of
# those events' data (their JSON as the log holds it). An index holds ~150-200 bytes per
# event of a step_hook loop (about 1 KB per round), so the events alone bound it to ~40 MB;
# the bytes bound it when the payloads are large (an event's data may hold 64 KB): the
# decoded objects take a few times their JSON.
DEFAULT_REPLAY_CACHE_SIZE = 512
DEFAULT_REPLAY_CACHE_EVENTS = 200_000
DEFAULT_REPLAY_CACHE_BYTES = 32 * 1024 * 1024


@dataclass(slots=True)
class CachedReplay:
    """A run's replay index as its last execution here left it, the log it reflects, and
    the workflow code that built it (other code must replay from scratch)."""

    index: ReplayIndex
    known: KnownLog
    workflow: WorkflowDef
    data_bytes: int = 0  # of the events it reflects: their data's JSON, as the log holds it


class ReplayCache:
    """A bounded LRU of :class:`CachedReplay` by run id. An entry is *taken* (removed) by
    the execution that uses it, which mutates its index; it comes back only if that
    execution suspends cleanly, so an aborted execution cannot leave a wrong index."""

    def __init__(
        self,
        size: int = DEFAULT_REPLAY_CACHE_SIZE,
        max_events: int = DEFAULT_REPLAY_CACHE_EVENTS,
        max_bytes: int = DEFAULT_REPLAY_CACHE_BYTES,
    ) -> None:
        self.size = size
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.events = 0  # the events the kept indexes reflect, in all
        self.data_bytes = 0  # and the bytes of their data
        self._entries: OrderedDict[str, CachedReplay] = OrderedDict()
        self.hits = 0  # claims that read only the tail of the log
        self.misses = 0  # claims that read the whole log though an index was offered

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, run_id: str, workflow: WorkflowDef | None) -> CachedReplay | None:
        entry = self._entries.pop(run_id, None)
        if entry is None:
            return None
        self._forget(entry)
        return entry if entry.workflow is workflow else None

    def keep(self, run_id: str, entry: CachedReplay) -> None:
        if (
            self.size <= 0
            or entry.known.event_count > self.max_events
            or entry.data_bytes > self.max_bytes
        ):
            return
        previous = self._entries.pop(run_id, None)
        if previous is not None:
            self._forget(previous)
        self._entries[run_id] = entry
        self.events += entry.known.event_count
        self.data_bytes += entry.data_bytes
        while (
            len(self._entries) > self.size
            or self.events > self.max_events
            or self.data_bytes > self.max_bytes
        ):
            _, evicted = self._entries.popitem(last=False)
            self._forget(evicted)

    def _forget(self, entry: CachedReplay) -> None:
        self.events -= entry.known.event_count
        self.data_bytes -= entry.data_bytes

"""Every Redis key name Parley uses, in one place — for Python and, through the generated
header of :mod:`._scripts`, for the Lua scripts too.

All keys of one run share the hash tag ``{p:N}`` of the run's *partition*, so every
per-run script touches a single slot and the same code runs on Redis Cluster. A chat
session's keys live in the session's partition, and runs bound to a session get ids in
that same partition, so a hook's prompt reaches the session's outbox in the hook's own
single-slot script.
"""

from __future__ import annotations

import functools
import zlib
from typing import NamedTuple

PREFIX = "parley"
# Names of the workflows some worker can execute (a single key: read alone, never in a script).
WORKFLOWS_KEY = f"{PREFIX}:workflows"

# Keys inside a partition, after its prefix "parley:{p:N}:". The Lua header gets one
# function per template (``key_<name>(prefix, ...)``), so no script spells a key itself.
TEMPLATES = {
    "run": "run:{run_id}",  # hash: status, workflow, session, result, lease, fence, count, last
    "events": "run:{run_id}:events",  # stream: the run's event log (the source of truth)
    # stream: a moment's copy of ``events`` made inside one script, to store it at its used
    # size (lua/lib.lua's shrink_events); never exists between two scripts
    "events_copy": "run:{run_id}:events:copy",
    # string: the logs and hooks of finished runs of the partition, compacted into one
    # blob (._archive's format 2, a segment); each run's hash names its segment (field
    # ``archive``), and once it does, the run's ``events`` and ``hooks`` do not exist
    "segment": "archive:{segment_id}",
    # string: one finished run's log and hooks, as compaction wrote them before segments
    # (._archive's format 1): read, no longer written
    "archive": "run:{run_id}:archive",
    "ckpt": "run:{run_id}:ckpt",  # hash: step id -> checkpoint JSON
    "hooks": "run:{run_id}:hooks",  # hash: hook id -> hook record (see ._records)
    "inbox": "run:{run_id}:inbox",  # stream: messages sent to the run, not received yet
    "children": "run:{run_id}:children",  # set: the runs it started with child()
    "tasks": "tasks",  # stream + group: "execute run X" messages
    "deadlines": "deadlines",  # sorted set: due ms -> deadline member
    # stream of one entry (``due``: ms): a deadline became the partition's earliest; the
    # workers' deadline loops wait on it (lua/lib.lua's schedule_deadline)
    "deadline_wake": "deadlines:wake",
    "pending": "pending",  # set: tokens of the pending hooks (list_hooks)
    "stats": "stats",  # hash: store-wide counters of the partition
    # hash session id -> number of its prompts still pending; while one is, no write sets
    # an expiry on the session's outbox (lua/lib.lua's post)
    "waiting": "waiting",
    "outbox": "session:{session}:outbox",  # stream: one chat session's messages
    # set: runs parked because no worker that saw them serves their version
    "parked": "parked:{version}",
    "session_meta": "session:{session}:meta",  # hash: the server's view of a session
    "session_lock": "session:{session}:starting",  # string: a message is starting a run
    # stream: a gateway process's wake-ups for its outbox reader of this partition
    "gateway_wake": "gateway:{process}:wake",
    # sorted set: the partition's runs tagged ``<key>=<value>``, scored by creation ms
    # (runtime.tags: neither part can contain '{', '}' or '|')
    "tag": "tag:{tag}",
    # sorted set: ``<run>|<tag>|<tag>...`` of the partition's ended tagged runs, scored by
    # the ms their keys expire: the tag index drops them then (lua/tags.lua)
    "tag_ends": "tag-ends",
}


def partition_of(key: str, partitions: int) -> int:
    """The partition of a run id or a session id."""
    return zlib.crc32(key.encode()) % partitions


@functools.lru_cache(maxsize=1024)
def partition_prefix(partition: int) -> str:
    return f"{PREFIX}:{{p:{partition}}}:"


# Where a partition's prefix ends: the first occurrence in any of its keys (the scripts
# find a run's prefix in its hash's key by it: lua/lib.lua's run_keys).
PARTITION_PREFIX_END = "}:"


def key(name: str, partition: int, **fields: str) -> str:
    return partition_prefix(partition) + TEMPLATES[name].format(**fields)


class RunKeys(NamedTuple):
    """The keys of one run and of its partition.

    A per-run script is given one key, the run's hash (``declared``): it names the slot
    the script runs on, and the script builds the others with the key functions of its
    header (lua/lib.lua's ``run_keys``); they share the hash's hash tag, so they are in
    that slot too. Seven more arguments on every call cost the client (encoding them) and
    Redis (parsing them) more than the script's seven concatenations.

    Only the hash's key is made up front; the others, which the hot path does not use,
    are made when read. A busy worker's window (runs started, resumed and compacted
    within ~15 s) holds more runs than :func:`run_keys` caches, and when every run
    missed the cache, eight keys and a frozen dataclass of twelve fields were made for
    each of a lifecycle's five calls (~5 % of a worker's samples, py-spy, 8,000 runs).
    """

    run_id: str
    partition: int
    prefix: str
    run: str
    declared: tuple[str]  # the KEYS of a per-run script

    def _key(self, name: str) -> str:
        head, hole, tail = _RUN_KEY_PARTS[name]
        return self.prefix + head + (self.run_id if hole else "") + tail

    @property
    def events(self) -> str:
        return self._key("events")

    @property
    def ckpt(self) -> str:
        return self._key("ckpt")

    @property
    def hooks(self) -> str:
        return self._key("hooks")

    @property
    def tasks(self) -> str:
        return self._key("tasks")

    @property
    def deadlines(self) -> str:
        return self._key("deadlines")

    @property
    def pending(self) -> str:
        return self._key("pending")

    @property
    def stats(self) -> str:
        return self._key("stats")


# The templates of RunKeys' keys, split around the run id once.
_RUN_KEY_PARTS = {
    name: TEMPLATES[name].partition("{run_id}")
    for name in ("run", "events", "ckpt", "hooks", "tasks", "deadlines", "pending", "stats")
}
_RUN_HEAD, _, _RUN_TAIL = _RUN_KEY_PARTS["run"]


@functools.lru_cache(maxsize=4096)
def run_keys(run_id: str, partitions: int) -> RunKeys:
    p = partition_of(run_id, partitions)
    prefix = partition_prefix(p)
    run = prefix + _RUN_HEAD + run_id + _RUN_TAIL
    return RunKeys(run_id, p, prefix, run, (run,))


def partition_keys(partition: int) -> list[str]:
    """The partition-wide keys, in the order the deadline script receives them."""
    names = ("deadlines", "tasks", "pending", "stats", "deadline_wake")
    return [key(name, partition) for name in names]


def partition_of_key(key: str) -> int:
    """The partition of a partition's key (``parley:{p:N}:...``)."""
    return int(key.split("{p:", 1)[1].split("}", 1)[0])


# A member of a partition's deadline set: ``<run>|h|<hook>`` (a hook's timeout) or
# ``<run>|t|<timer>`` (a sleep, a retry backoff); built and parsed in the Lua scripts.
DEADLINE_SEP = "|"
# Between a tag's key and value in its index key (``tag:customer=acme``).
TAG_SEP = "="
# Between the run id and its tags in a member of ``tag_ends``.
TAG_LIST_SEP = "|"
# A suspension copies its run's event stream to shrink it (lua/lib.lua's shrink_events)
# only while the log has at most this many events: the copy costs O(log), and the waste it
# removes is one stream node at most (so relatively small for a long log).
SHRINK_MAX_EVENTS = 100
# How many expired runs one write of a tagged run drops from the tag index, at most.
TAG_PRUNE_LIMIT = 16

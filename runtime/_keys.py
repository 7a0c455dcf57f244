"""Every Redis key name Parley uses, in one place.

All keys of one run share the hash tag ``{p:N}`` of the run's *partition*, so every
per-run script touches a single slot and the same code runs on Redis Cluster.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from .errors import InvalidToken

PREFIX = "parley"
GROUP = "workers"
# Names of the workflows some worker can execute (a single key: read alone, never in a script).
WORKFLOWS_KEY = f"{PREFIX}:workflows"

# A run id is "r-" + 24 hex digits; hook ids are built from names restricted below, so a
# token "<run_id>:<hook_id>" splits unambiguously and is safe in a URL path.
RUN_ID_RE = re.compile(r"^r-[0-9a-f]{24}$")
NAME_RE = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
HOOK_ID_RE = re.compile(r"^[A-Za-z0-9_\-.]{1,200}$")
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_\-]{16,64}$")


def partition_of(run_id: str, partitions: int) -> int:
    return zlib.crc32(run_id.encode()) % partitions


def partition_prefix(partition: int) -> str:
    return f"{PREFIX}:{{p:{partition}}}:"


def tasks_key(partition: int) -> str:
    return partition_prefix(partition) + "tasks"


def deadlines_key(partition: int) -> str:
    return partition_prefix(partition) + "deadlines"


def stats_key(partition: int) -> str:
    """Hash of counters of the partition (started, completed, ..., suspended now)."""
    return partition_prefix(partition) + "stats"


def waiting_sessions_key(partition: int) -> str:
    """Hash session id -> number of its prompts still pending (0: field removed). A session's
    outbox gets its retention TTL only when none is pending, whichever run ends."""
    return partition_prefix(partition) + "waiting"


def pending_hooks_key(partition: int) -> str:
    """Set of tokens of the pending hooks of the partition (for ``list_hooks``)."""
    return partition_prefix(partition) + "pending"


def session_partition(session_id: str, partitions: int) -> int:
    return zlib.crc32(session_id.encode()) % partitions


def session_meta_key(session_id: str, partitions: int) -> str:
    """The server's small hash about a session (exists, its active run); next to its outbox."""
    return (
        partition_prefix(session_partition(session_id, partitions)) + f"session:{session_id}:meta"
    )


def gateway_wake_key(outbox: str, process_id: str) -> str:
    """A websocket gateway process's wake-up stream for the partition of ``outbox``; in that
    partition, so one XREAD can block on it and the partition's outboxes together."""
    prefix = outbox[: outbox.index("}:") + 2]
    return f"{prefix}gateway:{process_id}:wake"


def outbox_key(session_id: str, partitions: int) -> str:
    """The session's outbox stream. It lives in the session's partition, and runs bound to
    a session get ids in that same partition, so a hook's prompt is written to the outbox
    in the same single-slot script that records the hook (also on Redis Cluster)."""
    return (
        partition_prefix(session_partition(session_id, partitions)) + f"session:{session_id}:outbox"
    )


@dataclass(frozen=True, slots=True)
class RunKeys:
    run_id: str
    partition: int

    @property
    def prefix(self) -> str:
        return partition_prefix(self.partition)

    @property
    def run(self) -> str:
        return f"{self.prefix}run:{self.run_id}"

    @property
    def events(self) -> str:
        return self.run + ":events"

    @property
    def ckpt(self) -> str:
        return self.run + ":ckpt"

    @property
    def hooks(self) -> str:
        return self.run + ":hooks"

    @property
    def tasks(self) -> str:
        return tasks_key(self.partition)

    @property
    def deadlines(self) -> str:
        return deadlines_key(self.partition)

    @property
    def pending(self) -> str:
        return pending_hooks_key(self.partition)

    @property
    def stats(self) -> str:
        return stats_key(self.partition)


def run_keys(run_id: str, partitions: int) -> RunKeys:
    return RunKeys(run_id, partition_of(run_id, partitions))


def make_token(run_id: str, hook_id: str) -> str:
    return f"{run_id}:{hook_id}"


def parse_token(token: object) -> tuple[str, str]:
    """Split a hook token into (run_id, hook_id), or raise :class:`InvalidToken`."""
    if not isinstance(token, str):
        raise InvalidToken(f"expected a token string, got {type(token).__name__}")
    run_id, sep, hook_id = token.partition(":")
    if not sep or not RUN_ID_RE.match(run_id) or not HOOK_ID_RE.match(hook_id):
        shown = token if len(token) <= 80 else token[:77] + "..."
        raise InvalidToken(f"expected a token '<run_id>:<hook_id>', got {shown!r}")
    return run_id, hook_id

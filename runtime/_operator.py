"""What an operator does to runs already started: look at them (a run, its events, its
hooks, the runs in the store, the counters) and act on them (retry, restart, cancel).

:class:`OperatorCalls` is a base class of :class:`~runtime.client.Runtime`; it only needs
the runtime's store and retention."""

from __future__ import annotations

from typing import TypeVar, cast

import orjson

from ._codec import dumps, encode_value
from .errors import RunFinished, RunNotFound, UsageError
from .history import history_before, restart_point
from .ids import check_run_id
from .models import Event, HookInfo, HookStatus, RunInfo, RunStatus
from .store import CancelOutcome, RetryOutcome, Store
from .tags import check_tags, parse_tag

__all__ = ["OperatorCalls"]


class OperatorCalls:
    store: Store
    retention_seconds: int

    async def now_ms(self) -> int:
        """The deployment's clock (ms since the epoch), the one hooks expire by: the store's,
        not this machine's. Compare with a hook's ``expires_at`` on it, so a machine whose
        clock is off neither refuses early nor accepts late."""
        return await self.store.now_ms()

    async def get_run(self, run_id: str) -> RunInfo:
        info = await self.store.get_run(check_run_id(run_id))
        if info is None:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        return info

    async def retry(self, run_id: str) -> None:
        """Send a blocked run (its code no longer matched its log) back to the workers, once
        code that matches its log is deployed: it resumes where it stopped; if it still
        does not match, it is blocked again."""
        check_run_id(run_id)
        retried = await self.store.retry(run_id, event=b"{}")
        if retried.outcome is RetryOutcome.NO_RUN:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        if retried.outcome is RetryOutcome.NOT_BLOCKED:
            raise UsageError(
                f"only a blocked run can be retried; this one is {retried.run_status}",
                run_id=run_id,
            )

    async def restart(self, run_id: str, from_step: str | None = None) -> str:
        """Continue a run as a new one from a step: the new run keeps the recorded results
        of the steps before ``from_step`` (a step id like ``charge-0``, or a step name) and
        executes again from there; by default from the step that failed or was cut short.
        For a failed or cancelled run, or to fork one that completed or waits. Returns the
        new run's id; the runs are linked (``restarted_from`` / ``restarted_as``)."""
        info = await self.get_run(run_id)
        if info.status in (RunStatus.PENDING, RunStatus.RUNNING):
            raise UsageError(
                f"a {info.status.value} run cannot be restarted now; wait for it to finish, "
                "fail or suspend (or cancel it)",
                run_id=run_id,
            )
        events = await self.events(run_id)
        copied = history_before(events, restart_point(events, from_step, run_id=run_id))
        new_id = self.store.new_run_id_beside(run_id)
        await self.store.restart(
            run_id,
            new_id,
            info.workflow,
            info.session,
            [(e.type, dumps(e.data)) for e in copied],
            info.tags or None,
        )
        return new_id

    async def cancel(self, run_id: str, reason: str | None = None) -> None:
        """Cancel a pending, running or suspended run: its pending hooks and deadlines are
        cleaned and a running worker loses the run at its next write."""
        check_run_id(run_id)
        cancelled = await self.store.cancel(
            run_id,
            event=encode_value({"reason": reason}, what="reason", limit=4096, run_id=run_id),
            message=orjson.dumps({"type": "status", "status": "cancelled", "run_id": run_id}),
            retention_seconds=self.retention_seconds,
        )
        if cancelled.outcome is CancelOutcome.NO_RUN:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        if cancelled.outcome is CancelOutcome.FINISHED:
            raise RunFinished(f"run already {cancelled.run_status}", run_id=run_id)

    # inspection ------------------------------------------------------------------------
    async def events(self, run_id: str) -> list[Event]:
        events = await self.store.events(check_run_id(run_id))
        if events is None:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        return events

    async def list_hooks(
        self,
        status: str | HookStatus | None = "pending",
        *,
        run_id: str | None = None,
        tag: tuple[str, str] | str | None = None,
    ) -> list[HookInfo]:
        """Hooks of one run (any status), or the pending hooks of every run; ``tag``
        (``("customer", "acme")`` or ``"customer:acme"``) keeps those of runs with it."""
        wanted = _wanted(HookStatus, status, "hook status")
        pair = None if tag is None else _tag_pair(tag)
        if run_id is not None:
            hooks = await self.store.run_hooks(check_run_id(run_id))
            if pair is not None and (await self.get_run(run_id)).tags.get(pair[0]) != pair[1]:
                return []
            return [h for h in hooks or [] if wanted is None or h.status is wanted]
        if wanted is not HookStatus.PENDING:
            raise UsageError("listing hooks of every run supports status='pending' only")
        if pair is not None:
            return await self.store.pending_hooks(pair)
        return await self.store.pending_hooks()

    async def list_runs(
        self,
        status: str | RunStatus | None = None,
        *,
        limit: int | None = None,
        version: str | None = None,
        tag: tuple[str, str] | str | None = None,
    ) -> list[RunInfo]:
        """Runs in the store, newest first (an operator's scan: O(keys), not for hot paths).

        ``status`` and ``version`` filter; ``limit`` bounds the number returned. With
        ``tag`` (``("customer", "acme")`` or ``"customer:acme"``) the runs come from the
        tag index instead: the cost depends on ``limit``, not on the size of the store.
        """
        wanted = _wanted(RunStatus, status, "run status")
        _check_limit(limit)
        if tag is not None:
            return await self.store.list_runs(wanted, limit, version, _tag_pair(tag))
        return await self.store.list_runs(wanted, limit, version)

    async def compact_ended(self) -> int:
        """Compact the ended runs left uncompacted (a worker that stopped within seconds of
        their end): their logs and hooks into one archive each, read back the same. A scan
        of the store: an operator's tool. Returns how many runs were compacted."""
        return await self.store.compact_ended()

    async def stats(self) -> dict[str, int]:
        """Store-wide counters: runs started/completed/failed/cancelled since the store
        began, runs suspended, blocked and parked now, and hooks pending now."""
        return await self.store.stats()


_Status = TypeVar("_Status", RunStatus, HookStatus)


def _wanted(kind: type[_Status], status: str | _Status | None, what: str) -> _Status | None:
    if status is None:
        return None
    try:
        return kind(status)
    except ValueError:
        accepted = ", ".join(s.value for s in kind)
        raise UsageError(f"{what} must be one of {accepted} (or None), got {status!r}") from None


def _check_limit(limit: int | None) -> None:
    # Checked here, not left to the store: a store slices with it, and a negative slice
    # silently drops the last runs instead of bounding them.
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UsageError(f"limit must be a positive integer (or None for every run), got {limit!r}")


def _tag_pair(tag: tuple[str, str] | str) -> tuple[str, str]:
    if isinstance(tag, str):
        return parse_tag(tag)
    key, value = tag
    checked = check_tags({key: value})
    return key, cast(str, checked[key])

"""The client side of Parley: start runs, send messages, and the chat sessions' messages;
answering hooks comes from :mod:`runtime._answers`, the operator's calls (inspect, retry,
restart, cancel) from :mod:`runtime._operator`. Everything goes through the store protocol."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, cast

from . import tracing
from ._answers import AnswerCalls
from ._codec import (
    Duration,
    check_portable,
    encode_fragment,
    encode_value,
    loads,
    loads_exact,
    parse_duration,
)
from ._operator import OperatorCalls
from .errors import (
    RunCancelled,
    RunFailed,
    RunFinished,
    RunNotFound,
    UsageError,
    WaitTimeout,
    WorkflowNotFound,
)
from .ids import (
    check_idempotency_key,
    check_name,
    check_new_run_id,
    check_run_id,
    check_session_id,
    new_session_id,
)
from .models import LOG_FORMAT, RunStatus
from .registry import get_workflow
from .settings import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_PARTITIONS,
    DEFAULT_RETENTION,
    DEFAULT_URL,
    MAX_BLOCK_SECONDS,
    Limits,
    Settings,
)
from .store import (
    SendOutcome,
    Store,
    open_store,
)
from .tags import check_tags

__all__ = ["Limits", "Runtime"]


def _start_attributes(workflow: str | Callable[..., Any]) -> dict[str, str]:
    """A ``parley.start`` span's attributes: the workflow's registered name, also when
    start() is given the function (its ``str`` is a ``<function ... at 0x...>`` repr that
    no one searches by); a function that is no workflow (the start fails) by its name."""
    if isinstance(workflow, str):
        return {"parley.workflow": workflow}
    name = getattr(workflow, "__parley_workflow__", None)
    if name is None:
        name = getattr(workflow, "__qualname__", None) or repr(workflow)
    return {"parley.workflow": str(name)}


class _Connect:
    """``await Runtime.connect(url, **options)`` builds and connects a runtime (the design's
    ``connect(url)``); ``await rt.connect()`` connects an existing one (idempotent). Either
    way, ``await rt.close()`` — or use ``async with Runtime(url) as rt``."""

    def __get__(
        self, runtime: Runtime | None, owner: type[Runtime]
    ) -> Callable[..., Awaitable[Runtime]]:
        if runtime is not None:
            return runtime._connect

        async def connect_new(redis_url: str | None = None, **options: Any) -> Runtime:
            return await owner(redis_url, **options)._connect()

        return connect_new


class Runtime(AnswerCalls, OperatorCalls):
    """A connection to a Parley store.

    ``redis_url`` is ``redis://...``, ``redis+cluster://...`` or ``memory://`` (default:
    ``$REDIS_URL``, else the embedded in-process store). ``partitions`` is fixed per
    deployment.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        partitions: int = DEFAULT_PARTITIONS,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        limits: Limits | None = None,
        retention: Duration = DEFAULT_RETENTION,
    ) -> None:
        if partitions < 1:
            raise UsageError(f"partitions must be >= 1, got {partitions}")
        self.url = redis_url or Settings.from_env().redis_url or DEFAULT_URL
        self.partitions = partitions
        self.lease_ms = int(lease_seconds * 1000)
        self.limits = limits or Limits()
        # Finished (completed, failed, cancelled) runs keep their keys this long.
        self.retention_seconds = max(1, int(parse_duration(retention, what="retention")))
        self.store: Store = open_store(self.url, partitions=partitions)
        self._connected = False

    def __repr__(self) -> str:
        return f"<Runtime {self.url} partitions={self.partitions}>"

    # connection ------------------------------------------------------------------------
    connect = _Connect()

    async def _connect(self) -> Runtime:
        if not self._connected:
            await self.store.open()
            self._connected = True
        return self

    async def close(self) -> None:
        if self._connected:
            await self.store.close()
            self._connected = False

    async def __aenter__(self) -> Runtime:
        return await self.connect()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def ping(self) -> None:
        """Raise :class:`~runtime.errors.StoreUnavailable` unless the store answers."""
        await self.store.ping()

    @staticmethod
    def decode(data: bytes | str) -> Any:
        """JSON from outside (an HTTP body, a websocket frame), every integer read exactly
        (so an answer beyond ±2**53 is refused by its value, not silently rounded).
        Malformed JSON raises ValueError."""
        return loads_exact(data)

    # runs ------------------------------------------------------------------------------
    async def start(
        self,
        workflow: str | Callable[..., Any],
        /,
        *args: Any,
        session: str | None = None,
        run_id: str | None = None,
        idempotency_key: str | None = None,
        tags: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        """Start a run of ``workflow`` (the function or its registered name); returns its id.

        ``tags`` (search attributes, e.g. ``{"customer": "acme"}``: see
        :mod:`runtime.tags` for what keys and values may hold) are recorded with the run
        and indexed: ``list_runs(tag=...)`` and ``list_hooks(tag=...)`` find it by them.

        ``run_id`` gives the run the caller's own id; ``idempotency_key`` names the run to
        start. Either way a start that finds its run already there starts nothing and
        returns its id: a start retried after an error or a timeout runs once. (The name
        is free again once the run has expired after its retention.)
        """
        if tracing.enabled():
            with tracing.span("parley.start", attributes=_start_attributes(workflow)):
                return await self._start(
                    workflow, args, session, run_id, idempotency_key, tags, kwargs
                )
        return await self._start(workflow, args, session, run_id, idempotency_key, tags, kwargs)

    async def start_with_message(
        self,
        session: str,
        message: dict[str, Any],
        workflow: str | Callable[..., Any],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> str:
        """Post ``message`` to ``session`` (as :meth:`post_to_session`) and start a run of
        ``workflow`` bound to it (as :meth:`start`): the message a chat visitor sent, shown
        before anything the run posts. It is posted only once the start has passed every
        check (the workflow known, the run's input and the message within the limits), so
        a refused start (``WorkflowNotFound``, ``InvalidPayload``, ``UsageError``) shows
        nothing and starts nothing."""
        attributes = _start_attributes(workflow) if tracing.enabled() else None
        with tracing.span("parley.start", attributes=attributes):
            return await self._start(
                workflow, args, session, None, idempotency_key, None, kwargs, message
            )

    async def _start(
        self,
        workflow: str | Callable[..., Any],
        args: tuple[Any, ...],
        session: str | None,
        run_id: str | None,
        idempotency_key: str | None,
        tags: Mapping[str, str] | None,
        kwargs: dict[str, Any],
        message: dict[str, Any] | None = None,
    ) -> str:
        name = await self._workflow_name(workflow)
        if session is not None:
            check_session_id(session)
        if run_id is not None and idempotency_key is not None:
            raise UsageError("give a run id or an idempotency key, not both")
        checked = check_tags(tags, run_id=run_id) if tags else None
        started: dict[str, Any] = {"args": list(args), "scoped": LOG_FORMAT}
        if kwargs:
            started["kwargs"] = kwargs
        if checked:
            started["tags"] = checked  # the workflow's set_tags starts from these
        trace = tracing.traceparent()
        if trace is not None:  # every execution of the run continues this trace
            started["trace"] = trace
        for n, arg in enumerate(args):
            check_portable(arg, what=f"argument {n} of the run", max_depth=self.limits.max_depth)
        for keyword, value in kwargs.items():
            check_portable(
                value, what=f"argument {keyword!r} of the run", max_depth=self.limits.max_depth
            )
        run_input = encode_value(
            started, what="workflow input", limit=self.limits.max_payload_bytes
        )
        if run_id is not None:
            check_new_run_id(run_id)
            if session is not None and not self.store.fits_session(run_id, session):
                raise UsageError(
                    f"run id {run_id!r} cannot be bound to this session (its messages live "
                    "elsewhere); give the run an idempotency key instead",
                    run_id=run_id,
                )
        else:
            key = None if idempotency_key is None else check_idempotency_key(idempotency_key)
            run_id = self.store.new_run_id(session, key)
        if message is not None and session is not None:
            # In the start's own atomic step, after every check: a refused start (or a
            # Redis gone meanwhile) leaves no message behind, a retried one no second copy,
            # and the run's first reply cannot be shown above it.
            await self.store.start(
                run_id,
                name,
                session,
                run_input,
                cast(dict[str, str] | None, checked),
                message=self._encode_message(message),
                retention_seconds=self.retention_seconds,
            )
        elif checked:
            await self.store.start(run_id, name, session, run_input, cast(dict[str, str], checked))
        else:
            await self.store.start(run_id, name, session, run_input)
        if trace is not None:
            tracing.annotate({"parley.run_id": run_id})
        return run_id

    async def _workflow_name(self, workflow: str | Callable[..., Any]) -> str:
        """The registered name; a name unknown here is accepted when a worker announced it
        (a server need not import the workflows' code)."""
        try:
            return get_workflow(workflow).name
        except WorkflowNotFound:
            if isinstance(workflow, str) and await self.store.workflow_announced(workflow):
                return workflow
            raise

    async def announce_workflows(self, names: Iterable[str]) -> None:
        """Record the workflow names a worker can execute (see :meth:`start`)."""
        await self.store.announce_workflows(list(names))

    async def wait(self, run_id: str, timeout: float = 30.0) -> Any:
        """Wait until the run finishes; return its result, or raise RunFailed /
        RunCancelled / WaitTimeout. A run that continued as new (``continue_as_new``) is
        followed to the run that continues it. Blocks on the run's event log (no
        polling)."""
        check_run_id(run_id)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout
        while True:
            snapshot = await self.store.run_snapshot(run_id)
            state = snapshot.status
            if state is None:
                raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
            if state is RunStatus.COMPLETED:
                return loads(snapshot.output)
            if state is RunStatus.FAILED:
                error = loads(snapshot.output) if snapshot.output else {}
                raise RunFailed(
                    f"run failed: {error.get('type')}: {error.get('message')}", run_id=run_id
                )
            if state is RunStatus.CANCELLED:
                raise RunCancelled("run was cancelled", run_id=run_id)
            if state is RunStatus.CONTINUED:
                run_id = loads(snapshot.output)["continued_to"]
                continue
            remaining = give_up - loop.time()
            if remaining <= 0:
                raise WaitTimeout(f"run still {state.value} after {timeout:g}s", run_id=run_id)
            block = min(remaining, MAX_BLOCK_SECONDS)
            await self.store.wait_for_events(
                run_id, snapshot.last_event_id, max(1, int(block * 1000))
            )

    async def send(self, run_id: str, topic: str, payload: Any) -> None:
        """Send ``payload`` to the run's ``receive(topic)``: delivered at once when the run
        waits for it, else kept (in order) until the run receives that topic. Each message
        is received once. A run that continued as new (``continue_as_new``) hands it on
        to the run its chain has reached, as it does the messages it had not received
        when it continued. From a workflow, send inside a step (a step may run again after
        a crash: give payloads an id if the receiver must see each once)."""
        check_run_id(run_id)
        check_name(topic, "topic")
        encoded = encode_value(
            payload,
            what="message",
            limit=self.limits.max_payload_bytes,
            run_id=run_id,
            max_depth=self.limits.max_depth,
        )
        sent = await self.store.send(
            run_id, topic, encode_fragment("payload", encoded, topic=topic)
        )
        if sent.outcome is SendOutcome.NO_RUN:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        if sent.outcome is SendOutcome.FINISHED:
            raise RunFinished(f"run already {sent.run_status}", run_id=run_id)

    # sessions --------------------------------------------------------------------------
    @staticmethod
    def new_session_id() -> str:
        return new_session_id()

    async def read_outbox(
        self, session: str, after: str = "0-0", *, count: int = 100, block_ms: int | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Messages of a session's outbox after the stream id ``after``."""
        entries = await self.store.read_outbox(check_session_id(session), after, count, block_ms)
        return [(entry.id, entry.message) for entry in entries]

    async def post_to_session(self, session: str, message: dict[str, Any]) -> str:
        """Append a message (agent text, status) to a session's outbox."""
        return await self.store.post(
            check_session_id(session),
            self._encode_message(message),
            retention_seconds=self.retention_seconds,
        )

    def _encode_message(self, message: dict[str, Any]) -> bytes:
        return encode_value(
            message,
            what="message",
            limit=self.limits.max_payload_bytes,
            max_depth=self.limits.max_depth,
        )

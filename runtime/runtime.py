"""The client side of Parley: start runs, answer hooks, inspect and cancel runs."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import jsonschema
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from . import _redis
from ._codec import Duration, encode_value, loads, parse_duration
from ._decoding import resume_error, run_info
from ._execution import encode_fragment, now_ms
from ._inspect import Inspection, check_run_id
from ._keys import (
    GROUP,
    SESSION_ID_RE,
    WORKFLOWS_KEY,
    outbox_key,
    parse_token,
    partition_of,
    run_keys,
    session_partition,
    tasks_key,
)
from .errors import (
    InvalidPayload,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunNotFound,
    UsageError,
    WaitTimeout,
    WorkflowNotFound,
)
from .models import RunInfo, RunStatus
from .registry import get_workflow

DEFAULT_URL = "memory://"


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one run may store; exceeding one is a clear error, not a crash."""

    max_payload_bytes: int = 64 * 1024  # a hook answer, a step/workflow result, run input
    max_checkpoint_bytes: int = 256 * 1024  # one step checkpoint
    max_events: int = 10_000  # events in one run's log


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


class Runtime(Inspection):
    """A connection to a Parley store.

    ``redis_url`` is ``redis://...`` or ``memory://`` (default: ``$REDIS_URL``, else the
    embedded in-process store). ``partitions`` is fixed per deployment.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        partitions: int = 16,
        lease_seconds: float = 30.0,
        limits: Limits | None = None,
        retention: Duration = "7d",
    ) -> None:
        if partitions < 1:
            raise UsageError(f"partitions must be >= 1, got {partitions}")
        self.url = redis_url or os.environ.get("REDIS_URL") or DEFAULT_URL
        # On a cluster, commands on keys of different partitions cannot share a pipeline
        # round trip or a multi-stream read; the worker issues them per partition instead.
        self.is_cluster = _redis.is_cluster_url(self.url)
        self.partitions = partitions
        self.lease_ms = int(lease_seconds * 1000)
        self.limits = limits or Limits()
        # Finished (completed, failed, cancelled) runs keep their keys this long.
        self.retention_seconds = max(1, int(parse_duration(retention, what="retention")))
        self._redis: aioredis.Redis | None = None
        self._scripts: _redis.Scripts | None = None

    def __repr__(self) -> str:
        return f"<Runtime {self.url} partitions={self.partitions}>"

    # connection ------------------------------------------------------------------------
    connect = _Connect()

    async def _connect(self) -> Runtime:
        if self._redis is None:
            self._redis = _redis.connect(self.url)
            self._scripts = _redis.Scripts(self._redis, cluster=self.is_cluster)
            await self.ensure_groups()
        return self

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None
            self._scripts = None

    async def __aenter__(self) -> Runtime:
        return await self.connect()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def redis(self) -> aioredis.Redis:
        if self._redis is None:
            raise UsageError("the runtime is not connected: use `async with Runtime(...)`")
        return self._redis

    @property
    def scripts(self) -> _redis.Scripts:
        if self._scripts is None:
            raise UsageError("the runtime is not connected: use `async with Runtime(...)`")
        return self._scripts

    async def ensure_groups(self) -> None:
        """Create each partition's task stream and consumer group (idempotent). Group id 0:
        tasks added before the group existed are still delivered."""
        for partition in range(self.partitions):
            try:
                await self.redis.xgroup_create(tasks_key(partition), GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    @staticmethod
    def decode(data: bytes) -> Any:
        return loads(data)

    # runs ------------------------------------------------------------------------------
    def _new_run_id(self, session: str | None) -> str:
        while True:
            run_id = "r-" + secrets.token_hex(12)
            # A session's runs live in the session's partition, so prompts reach its
            # outbox in the same single-slot script that records the hook.
            if session is None or partition_of(run_id, self.partitions) == session_partition(
                session, self.partitions
            ):
                return run_id

    async def start(
        self,
        workflow: str | Callable[..., Any],
        /,
        *args: Any,
        session: str | None = None,
        **kwargs: Any,
    ) -> str:
        """Start a run of ``workflow`` (the function or its registered name); returns its id."""
        name = await self._workflow_name(workflow)
        if session is not None:
            check_session_id(session)
        run_input = encode_value(
            {"args": list(args), "kwargs": kwargs} if kwargs else {"args": list(args)},
            what="workflow input",
            limit=self.limits.max_payload_bytes,
        )
        run_id = self._new_run_id(session)
        keys = run_keys(run_id, self.partitions)
        await self.scripts.start(
            keys=[keys.run, keys.events, keys.tasks, keys.stats],
            args=[run_id, name, session or "", now_ms(), run_input],
        )
        return run_id

    async def _workflow_name(self, workflow: str | Callable[..., Any]) -> str:
        """The registered name; a name unknown here is accepted when a worker announced it
        (a server need not import the workflows' code)."""
        try:
            return get_workflow(workflow).name
        except WorkflowNotFound:
            if isinstance(workflow, str) and await self.redis.sismember(WORKFLOWS_KEY, workflow):
                return workflow
            raise

    async def announce_workflows(self, names: Iterable[str]) -> None:
        """Record the workflow names a worker can execute (see :meth:`start`)."""
        names = list(names)
        if names:
            await self.redis.sadd(WORKFLOWS_KEY, *names)

    async def resume_hook(self, token: str, payload: Any) -> bool:
        """Deliver ``payload`` as the answer of the hook ``token``.

        Returns True when the answer was recorded, False when the same answer had already
        been accepted (idempotent). Raises InvalidToken, HookNotFound, RunNotFound,
        HookAlreadyAnswered (a different answer was accepted), HookExpired/HookCancelled,
        RunFinished, InvalidPayload/PayloadTooLarge; none of these changes anything.
        """
        run_id, hook_id = parse_token(token)
        encoded = encode_value(
            payload,
            what="hook payload",
            limit=self.limits.max_payload_bytes,
            run_id=run_id,
            hook_id=hook_id,
        )
        keys = run_keys(run_id, self.partitions)
        script_keys = [
            keys.run,
            keys.events,
            keys.hooks,
            keys.tasks,
            keys.deadlines,
            keys.pending,
            keys.stats,
        ]
        event = encode_fragment("payload", encoded, hook_id=hook_id)
        digest = hashlib.sha1(encoded).hexdigest()
        validated = "0"
        while True:
            reply = await self.scripts.resume(
                keys=script_keys,
                args=[
                    run_id,
                    hook_id,
                    encoded,
                    token,
                    validated,
                    self.limits.max_events,
                    event,
                    digest,
                ],
            )
            outcome = reply[0].decode()
            if outcome != "schema":
                break
            self._validate(loads(reply[1][2:])["schema"], payload, run_id, hook_id)
            validated = "1"
        if outcome == "ok":
            return True
        if outcome == "dup":
            return False
        raise resume_error(outcome, reply, run_id, hook_id)

    def _validate(self, schema: dict[str, Any], payload: Any, run_id: str, hook_id: str) -> None:
        validator = _validator(encode_value(schema, what="schema", limit=1 << 30).decode())
        error = jsonschema.exceptions.best_match(validator.iter_errors(payload))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise InvalidPayload(
                f"answer does not match the hook's schema at {where}: {error.message}",
                run_id=run_id,
                hook_id=hook_id,
            )

    async def get_run(self, run_id: str) -> RunInfo:
        keys = run_keys(check_run_id(run_id), self.partitions)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(keys.run)
            pipe.hgetall(keys.hooks)
            run, hooks = await pipe.execute()
        if not run:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        return run_info(run_id, run, hooks)

    async def wait(self, run_id: str, timeout: float = 30.0) -> Any:
        """Wait until the run finishes; return its result, or raise RunFailed /
        RunCancelled / WaitTimeout. Blocks on the run's event stream (no polling)."""
        keys = run_keys(check_run_id(run_id), self.partitions)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout
        while True:
            status, out, last_id = await self.scripts.wait_state(
                keys=[keys.run, keys.events], args=[]
            )
            if not status:
                raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
            state = RunStatus(status.decode())
            if state is RunStatus.COMPLETED:
                return loads(out)
            if state is RunStatus.FAILED:
                error = loads(out) if out else {}
                raise RunFailed(
                    f"run failed: {error.get('type')}: {error.get('message')}", run_id=run_id
                )
            if state is RunStatus.CANCELLED:
                raise RunCancelled("run was cancelled", run_id=run_id)
            remaining = give_up - loop.time()
            if remaining <= 0:
                raise WaitTimeout(f"run still {state.value} after {timeout:g}s", run_id=run_id)
            block = min(remaining, _redis.MAX_BLOCK_SECONDS)
            await self.redis.xread({keys.events: last_id}, count=1, block=max(1, int(block * 1000)))

    async def cancel(self, run_id: str, reason: str | None = None) -> None:
        """Cancel a pending, running or suspended run: its pending hooks and deadlines are
        cleaned and a running worker loses the run at its next write."""
        keys = run_keys(check_run_id(run_id), self.partitions)
        reply = await self.scripts.cancel(
            keys=[
                keys.run,
                keys.events,
                keys.hooks,
                keys.ckpt,
                keys.tasks,
                keys.deadlines,
                keys.pending,
                keys.stats,
            ],
            args=[
                run_id,
                encode_value({"reason": reason}, what="reason", limit=4096),
                now_ms(),
                self.retention_seconds,
            ],
        )
        outcome = reply[0].decode()
        if outcome == "no_run":
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        if outcome == "finished":
            raise RunFinished(f"run already {reply[1].decode()}", run_id=run_id)

    # sessions --------------------------------------------------------------------------
    @staticmethod
    def new_session_id() -> str:
        return secrets.token_urlsafe(24)

    def outbox_key(self, session: str) -> str:
        return outbox_key(check_session_id(session), self.partitions)

    async def read_outbox(
        self, session: str, after: str = "0-0", *, count: int = 100, block_ms: int | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Messages of a session's outbox after the stream id ``after``."""
        key = self.outbox_key(session)
        reply: Any = await self.redis.xread({key: after}, count=count, block=block_ms)
        out = []
        for _stream, entries in reply or []:
            for entry_id, fields in entries:
                out.append((entry_id.decode(), loads(fields[b"m"])))
        return out

    async def post_to_session(self, session: str, message: dict[str, Any]) -> str:
        """Append a message (agent text, status) to a session's outbox."""
        data = encode_value(message, what="message", limit=self.limits.max_payload_bytes)
        entry_id: Any = await self.redis.xadd(self.outbox_key(session), {"m": data})
        return str(entry_id.decode())


@functools.lru_cache(maxsize=256)  # bounded: schemas may be generated per question
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(loads(schema_json))


def check_session_id(session: str) -> str:
    if not isinstance(session, str) or not SESSION_ID_RE.match(session):
        raise UsageError(f"a session id must match {SESSION_ID_RE.pattern}, got {session!r}")
    return session

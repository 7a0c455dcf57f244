"""Every setting Parley reads from the environment, and every default, in one place.

Processes read the environment once, through :meth:`Settings.from_env`; library code
takes explicit arguments whose defaults are the constants below.

| variable | default | meaning |
|---|---|---|
| ``REDIS_URL`` | ``memory://`` | the store (see :func:`runtime.store.open_store`) |
| ``PARLEY_PARTITIONS`` | 16 | partitions of the store; fixed per deployment |
| ``PARLEY_LOG_LEVEL`` | INFO | log level of ``parley`` processes |
| ``PARLEY_LOG_FORMAT`` | text | ``text`` or ``json`` (JSON lines) |
| ``PARLEY_METRICS_PORT`` | 0 | a worker's Prometheus port (0: off) |
| ``PARLEY_CONSUMER_SWEEP_IDLE`` | ``1d`` | a dead worker's consumer is swept after this idle |
| ``PARLEY_VERSION`` | (none) | a worker's deployment version (``parley worker --version``) |
| ``PARLEY_API_KEY`` | (none) | an ``admin`` API key of the server, named ``default`` |
| ``PARLEY_API_KEYS`` | (none) | more keys: ``name:scope:secret,...`` (admin/operator/reader) |
| ``PARLEY_API_KEYS_FILE`` | (none) | API keys in JSON: ``[{"name", "scope", "secret"}]`` |
| ``PARLEY_LINK_KEYS`` | (none) | answer-link secrets ``kid=secret,...``: first signs, all verify |
| ``PARLEY_PUBLIC_URL`` | (none) | the server's address for people, in ``hook_url`` links |
| ``PARLEY_CHAT_WORKFLOW`` | (none) | the workflow a visitor's chat message starts |
| ``PARLEY_CHAT_WORKFLOWS`` | (none) | more chat workflows pages may pick (comma-separated) |
| ``PARLEY_ALLOWED_ORIGINS`` | (none) | more origins whose pages may embed the widget |
| ``PARLEY_SESSION_RATE`` | ``30/minute`` | ``POST /api/sessions`` per client IP (``off``: none) |
| ``PARLEY_MESSAGE_RATE`` | ``20/minute`` | chat messages that start runs, per client IP |
| ``PARLEY_WS_RATE`` | 10 | frames a page's websocket may send per second (a token bucket) |
| ``PARLEY_WS_BURST`` | 20 | ... in bursts of at most this many |
| ``PARLEY_TRUSTED_PROXIES`` | (none) | proxies whose ``X-Forwarded-For`` names the client |
| ``PARLEY_REQUEST_TIMEOUT`` | 10 | seconds a client has to send a whole HTTP request |
| ``PARLEY_DEMO_DATA_DIR`` | (see below) | the data of ``parley demo``'s private Redis |
| ``PARLEY_DEMO_MODEL`` | (none) | the demos' model: an ``init_chat_model`` spec |
| ``PARLEY_DEMO_MODEL_BASE_URL`` | (none) | its OpenAI-compatible endpoint |
| ``PARLEY_DEMO_MODEL_API_KEY`` | (none) | its key |
| ``PARLEY_DEMO_PROMPT_TIMEOUT`` | ``10m`` | how long the demo agents wait for an answer |
| ``PARLEY_DEMO_CHUNK_DELAY`` | 0.03 | seconds between the scripted models' chunks |
| ``PARLEY_TRACING`` | 0 | ``1`` (true, yes, on; or 0, false, no, off): spans, global provider |
| ``PARLEY_TRACING_FILE`` | (none) | spans of a ``parley`` process as JSON lines in this file |
| ``PARLEY_EVENT_LOOP`` | auto | ``auto``: uvloop when installed; ``asyncio``: asyncio's own loop |
| ``PARLEY_CRASH_AT`` | (none) | fault injection for tests (``runtime._faults``) |

Rates are ``limits`` strings (``30/minute``, ``5/second;100/hour``), counted in the store's
Redis, so they hold across server processes. ``PARLEY_TRUSTED_PROXIES``: comma-separated
IPs or CIDRs (``10.0.0.0/8``), or ``*``; without it ``X-Forwarded-For`` is ignored and the
client is the peer of the TCP connection.
``PARLEY_ALLOWED_ORIGINS``: comma-separated origins (``https://shop.example``) or ``*``; the
server's own origin is always allowed (CORS and the websocket's Origin check). The demo's
data directory defaults to ``$XDG_DATA_HOME/parley/demo`` (``~/.local/share/parley/demo``).
``PARLEY_DEMO_MODEL`` (e.g. ``openai:gpt-4o-mini``) replaces the demos' scripted models; the
key falls back to the provider's own variable (``OPENAI_API_KEY``). Without a model the
demos need no network and no key.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "memory://"
DEFAULT_PARTITIONS = 16
DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_RETENTION = "7d"  # finished runs keep their keys this long

# Worker
DEFAULT_CONCURRENCY = 64  # executions at once per worker
TASK_BLOCK_SECONDS = 1.0  # one blocking read of the task streams
# The longest between two passes over the deadlines: a safety net only (a lost notice); a
# deadline is fired when due, the worker sleeping until then (runtime/worker/deadlines.py).
DEADLINE_SCAN_SECONDS = 5.0
HAND_BACK_DELAY_SECONDS = 1.0  # before a worker gives back a task it cannot run
# how often a worker announces its workflows again (they are lost if Redis comes back empty)
ANNOUNCE_SECONDS = 10.0
# The consumers that workers which died left in the task groups are deleted once idle this
# long with nothing pending (runtime/worker/leases.py). A live worker's consumer that got
# nothing that long is deleted too, harmlessly: the read that next delivers to it creates it.
DEFAULT_CONSUMER_SWEEP_IDLE = "1d"
# how often (on average, jittered) each worker sweeps them: rare, and idempotent
CONSUMER_SWEEP_SECONDS = 3600.0
# the longest a crashed background loop of a worker waits before it is restarted
LOOP_RESTART_MAX_SECONDS = 5.0

# Redis connections
MAX_BLOCK_SECONDS = 2.0  # the longest BLOCK of any XREAD/XREADGROUP Parley sends
POOL_MAX_CONNECTIONS = 256
POOL_WAIT_SECONDS = 30  # a caller waits this long for a free pooled connection
HEALTH_CHECK_SECONDS = 15
# Longer than any blocking read, so a socket timeout means a dead server, not a quiet stream.
SOCKET_TIMEOUT_SECONDS = MAX_BLOCK_SECONDS * 5
# ``?wait=N`` store URLs: how long a write waits for its replicas before it is reported as
# unconfirmed (its fate unknown) instead of acknowledged.
REPLICA_WAIT_TIMEOUT_MS = 1000

# Server: abuse limits (server.abuse)
DEFAULT_SESSION_RATE = "30/minute"  # sessions one client IP may create
DEFAULT_MESSAGE_RATE = "20/minute"  # chat messages (each starts a run) of one client IP
DEFAULT_WS_RATE = 10.0  # frames per second a page's websocket may send, per socket ...
DEFAULT_WS_BURST = 20  # ... in bursts of at most this many
DEFAULT_REQUEST_TIMEOUT_SECONDS = 10.0  # to send a whole request: headers and body

# Streams
OUTBOX_MAXLEN = 10_000  # messages kept in a session's outbox (approximate trim)
TASKS_GROUP = "workers"  # the consumer group of the task streams


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one run may store; exceeding one is a clear error, not a crash."""

    max_payload_bytes: int = 64 * 1024  # a hook answer, a step/workflow result, run input
    max_checkpoint_bytes: int = 256 * 1024  # one step checkpoint
    max_events: int = 10_000  # events in one run's log
    # Nesting of objects and arrays in what enters from outside (run input, answers,
    # messages); integers there must be within ±2**53 (runtime._codec.check_portable).
    max_depth: int = 64


@dataclass(frozen=True, slots=True)
class Settings:
    """What a ``parley`` process reads from its environment."""

    redis_url: str | None = None
    partitions: int = DEFAULT_PARTITIONS
    log_level: str = "INFO"
    log_format: str = "text"
    metrics_port: int = 0
    # PARLEY_CONSUMER_SWEEP_IDLE, checked by the worker (runtime.worker.leases.sweep_idle_ms)
    consumer_sweep_idle: str = DEFAULT_CONSUMER_SWEEP_IDLE
    version: str = ""
    api_key: str = ""
    chat_workflow: str | None = None
    chat_workflows: tuple[str, ...] = ()
    api_keys: str = ""  # PARLEY_API_KEYS, parsed by the server (server.auth)
    api_keys_file: str | None = None
    link_keys: tuple[tuple[str, str], ...] = ()  # (key id, secret), the signing one first
    public_url: str | None = None
    allowed_origins: tuple[str, ...] = ()
    tracing: bool = False  # PARLEY_TRACING (runtime.tracing)
    tracing_file: str | None = None  # PARLEY_TRACING_FILE
    session_rate: str = DEFAULT_SESSION_RATE
    message_rate: str = DEFAULT_MESSAGE_RATE
    ws_rate: float = DEFAULT_WS_RATE
    ws_burst: int = DEFAULT_WS_BURST
    trusted_proxies: tuple[str, ...] = ()
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_SECONDS
    event_loop: str = "auto"  # PARLEY_EVENT_LOOP: auto (uvloop when installed) | asyncio

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        offered = env.get("PARLEY_CHAT_WORKFLOWS", "")
        origins = env.get("PARLEY_ALLOWED_ORIGINS", "")
        return cls(
            redis_url=env.get("REDIS_URL") or None,
            partitions=_int(env, "PARLEY_PARTITIONS", DEFAULT_PARTITIONS),
            log_level=log_level(env.get("PARLEY_LOG_LEVEL") or "INFO", "PARLEY_LOG_LEVEL"),
            log_format=_choice(env, "PARLEY_LOG_FORMAT", ("text", "json"), "text"),
            metrics_port=metrics_port(env.get("PARLEY_METRICS_PORT") or "0", "PARLEY_METRICS_PORT"),
            consumer_sweep_idle=env.get("PARLEY_CONSUMER_SWEEP_IDLE")
            or DEFAULT_CONSUMER_SWEEP_IDLE,
            version=env.get("PARLEY_VERSION", ""),
            api_key=env.get("PARLEY_API_KEY", ""),
            chat_workflow=env.get("PARLEY_CHAT_WORKFLOW") or None,
            chat_workflows=tuple(n.strip() for n in offered.split(",") if n.strip()),
            api_keys=env.get("PARLEY_API_KEYS", ""),
            api_keys_file=env.get("PARLEY_API_KEYS_FILE") or None,
            link_keys=_pairs(env, "PARLEY_LINK_KEYS"),
            public_url=(env.get("PARLEY_PUBLIC_URL") or "").rstrip("/") or None,
            allowed_origins=tuple(o.strip() for o in origins.split(",") if o.strip()),
            tracing=_choice(env, "PARLEY_TRACING", _SWITCH, "0") in ("1", "true", "yes", "on"),
            tracing_file=env.get("PARLEY_TRACING_FILE") or None,
            event_loop=_choice(env, "PARLEY_EVENT_LOOP", ("auto", "asyncio"), "auto"),
            session_rate=env.get("PARLEY_SESSION_RATE") or DEFAULT_SESSION_RATE,
            message_rate=env.get("PARLEY_MESSAGE_RATE") or DEFAULT_MESSAGE_RATE,
            ws_rate=_positive(env, "PARLEY_WS_RATE", DEFAULT_WS_RATE, "frames per second"),
            ws_burst=_at_least_one(env, "PARLEY_WS_BURST", DEFAULT_WS_BURST, "frames"),
            trusted_proxies=_list(env, "PARLEY_TRUSTED_PROXIES"),
            request_timeout=_seconds(
                env, "PARLEY_REQUEST_TIMEOUT", DEFAULT_REQUEST_TIMEOUT_SECONDS
            ),
        )


@dataclass(frozen=True, slots=True)
class DemoSettings:
    """What the demos (``parley demo`` and its agents) read from the environment."""

    data_dir: Path
    model: str | None = None
    model_base_url: str | None = None
    model_api_key: str | None = None
    prompt_timeout: str = "10m"
    chunk_delay: float = 0.03

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DemoSettings:
        env = os.environ if env is None else env
        data_home = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        delay = env.get("PARLEY_DEMO_CHUNK_DELAY") or "0.03"
        try:
            chunk_delay = float(delay)
        except ValueError:
            raise ValueError(f"PARLEY_DEMO_CHUNK_DELAY must be seconds, got {delay!r}") from None
        return cls(
            data_dir=Path(env.get("PARLEY_DEMO_DATA_DIR") or Path(data_home) / "parley" / "demo"),
            model=env.get("PARLEY_DEMO_MODEL") or None,
            model_base_url=env.get("PARLEY_DEMO_MODEL_BASE_URL") or None,
            model_api_key=env.get("PARLEY_DEMO_MODEL_API_KEY") or None,
            prompt_timeout=env.get("PARLEY_DEMO_PROMPT_TIMEOUT") or "10m",
            chunk_delay=chunk_delay,
        )


def _pairs(env: Mapping[str, str], name: str) -> tuple[tuple[str, str], ...]:
    """``a=x,b=y`` as ((a, x), (b, y)), in order."""
    pairs = []
    for n, item in enumerate(env.get(name, "").split(","), 1):
        if not item.strip():
            continue
        key, sep, value = item.strip().partition("=")
        if not sep or not key or not value:  # the item is not shown: it holds a secret
            raise ValueError(f"{name}: item {n} must be 'id=secret' (items comma-separated)")
        pairs.append((key, value))
    return tuple(pairs)


def _list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in env.get(name, "").split(",") if item.strip())


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    return _positive(env, name, default, "seconds")


def _positive(env: Mapping[str, str], name: str, default: float, unit: str) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of {unit}, got {raw!r}") from None
    if not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive number of {unit}, got {raw!r}")
    return value


def _at_least_one(env: Mapping[str, str], name: str, default: int, unit: str) -> int:
    value = _int(env, name, default)
    if value < 1:
        raise ValueError(f"{name} must be a whole number of {unit}, 1 or more, got {value}")
    return value


_SWITCH = ("0", "1", "false", "true", "no", "yes", "off", "on")  # a boolean variable


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = (env.get(name) or default).strip().lower()
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def log_level(raw: str, name: str) -> str:
    """``raw`` as one of logging's level names (``info`` is ``INFO``); ``name`` is where
    it was given, for the error."""
    level = raw.strip().upper()
    known = logging.getLevelNamesMapping()
    if level not in known:
        raise ValueError(f"{name} must be one of {', '.join(known)}; got {raw!r}")
    return level


# What a worker's metrics port may be (``--metrics-port``, ``PARLEY_METRICS_PORT``).
METRICS_PORT_EXPECTED = "a port 1-65535 (0: no metrics)"


def metrics_port(raw: str, name: str) -> int:
    """``raw`` as a worker's metrics port, 0 for none; ``name`` is where it was given, for
    the error. Checked before the worker starts: bind() would refuse it with a traceback."""
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"{name} must be {METRICS_PORT_EXPECTED}, got {raw!r}")
    return port


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def crash_points_spec() -> str:
    """``PARLEY_CRASH_AT``: where a test wants this process to kill itself."""
    return os.environ.get("PARLEY_CRASH_AT", "")

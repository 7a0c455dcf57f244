"""What every handler of the server shares: its configuration and its context."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from runtime import Runtime, Worker
from runtime.links import LinkSigner
from runtime.metrics import Metrics
from runtime.settings import (
    DEFAULT_MESSAGE_RATE,
    DEFAULT_SESSION_RATE,
    DEFAULT_WS_BURST,
    DEFAULT_WS_RATE,
)

from .abuse import AbuseLimits
from .auth import ApiKey, KeyRing
from .origins import OriginPolicy
from .sessions import Sessions
from .tailer import OutboxTailer
from .watch import HookWatcher, StatsHistory

# The widget's files: the ``widget`` package's data (a source checkout or an installed wheel).
WIDGET_DIR = Path(str(files("widget")))
MAX_MESSAGE_CHARS = 4000  # a visitor's chat message


@dataclass(frozen=True, slots=True)
class ServerConfig:
    api_key: str
    chat_workflow: str | None = None  # started by a visitor's message on the websocket
    chat_workflows: frozenset[str] = frozenset()  # others a page may pick ("agent")
    max_body_bytes: int = 256 * 1024  # an HTTP request body
    max_frame_bytes: int = 64 * 1024  # a websocket frame from the page
    max_message_chars: int = MAX_MESSAGE_CHARS  # a visitor's chat message
    ws_rate: float = DEFAULT_WS_RATE  # frames per second per socket ...
    ws_burst: int = DEFAULT_WS_BURST  # ... with bursts up to this many
    ws_block_ms: int = 2_000  # one blocking read of the outbox tailer (<= MAX_BLOCK_SECONDS)
    ws_queue_size: int = 1_000  # messages a socket may fall behind before it is closed
    widget_dir: Path = WIDGET_DIR
    # More API keys, besides ``api_key`` (an admin key named "default" when non-empty).
    api_keys: tuple[ApiKey, ...] = ()
    # (key id, secret) of answer links, the signing one first; none: no answer links.
    link_keys: tuple[tuple[str, str], ...] = ()
    public_url: str | None = None  # the address in minted links (default: the request's)
    live_interval: float = 0.25  # the console's pending hooks are read this often (if open)
    stats_every: float = 30.0  # the console's chart samples the store's counters this often
    # the pages that may embed the widget (CORS and the websocket's Origin check)
    origins: OriginPolicy = field(default_factory=OriginPolicy)
    # per client IP, counted in the store's Redis (server.abuse); "off": no limit
    session_rate: str = DEFAULT_SESSION_RATE  # POST /api/sessions
    message_rate: str = DEFAULT_MESSAGE_RATE  # chat messages that start runs


@dataclass(slots=True)
class ServerContext:
    runtime: Runtime
    config: ServerConfig
    sessions: Sessions
    tailer: OutboxTailer
    worker: Worker | None = None
    metrics: Metrics = dataclasses.field(default_factory=Metrics)
    keys: KeyRing = dataclasses.field(default_factory=lambda: KeyRing(()))
    links: LinkSigner | None = None
    # Set as the server begins to shut down: what streams until the client leaves (the
    # console's live hooks) ends then, since uvicorn waits for every open response to end
    # before the app's lifespan hears of the shutdown.
    draining: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    watcher: HookWatcher = dataclasses.field(init=False)
    history: StatsHistory = dataclasses.field(init=False)
    abuse: AbuseLimits = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.watcher = HookWatcher(self.runtime, interval=self.config.live_interval)
        self.history = StatsHistory(self.runtime, every=self.config.stats_every)
        self.abuse = AbuseLimits(
            self.runtime.url,
            session_rate=self.config.session_rate,
            message_rate=self.config.message_rate,
        )

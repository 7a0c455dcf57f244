"""Parley's server: the HTTP JSON API, the websocket gateway of chat sessions, and the
chat widget's static files (Starlette, served by uvicorn)."""

from __future__ import annotations

from .app import create_app
from .context import ServerConfig
from .errors import ApiError

__all__ = ["ApiError", "ServerConfig", "create_app"]

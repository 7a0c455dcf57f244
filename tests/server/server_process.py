"""A real ``parley server`` process (uvicorn) on a free loopback port, for the tests that
need real sockets: rate limits across processes, slow clients, websocket frames."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from runtime.testing import free_port
from tests.processes import PARTITIONS, ROOT

API_KEY = "server-process-key-0123"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


class ServerProcess:
    def __init__(self, redis_url: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix="parley-server-", suffix=".log"
        )
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "runtime.cli", "server", "--app", "tests.server.apps"),
                *("--redis", redis_url, "--partitions", str(PARTITIONS)),
                *("--host", "127.0.0.1", "--port", str(self.port), "--log-level", "WARNING"),
            ],
            cwd=ROOT,
            env={**os.environ, "PARLEY_API_KEY": API_KEY, **(env or {})},
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while self.process.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"parley server did not become healthy:\n{self.log()}")

    def log(self) -> str:
        return Path(self.log_file.name).read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log_file.close()

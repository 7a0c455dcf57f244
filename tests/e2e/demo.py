"""``parley demo`` as a real process on a free port, restartable on the same port."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.processes import ROOT

from .stack import free_port


class DemoProcess:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PARLEY_API_KEY")},
            "PARLEY_DEMO_CHUNK_DELAY": "0.01",
            **(env or {}),
        }
        self.log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in close()
            prefix="parley-demo-", suffix=".log"
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", "demo", "--port", str(self.port), *self.args],
            cwd=ROOT,
            env=self.env,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
        )
        self.starts += 1
        deadline = time.monotonic() + 30
        while True:
            # A 200 alone may come from another test's server that took the port while this
            # demo was stopped (the suite runs in parallel); uvicorn's banner, once per start,
            # says that this process is the one listening.
            try:
                if (
                    httpx.get(self.url + "/healthz").status_code == 200
                    and self.log().count("Uvicorn running on") >= self.starts
                ):
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"parley demo did not start; log:\n{self.log()}")
            time.sleep(0.05)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout=20)

    def log(self) -> str:
        return Path(self.log_file.name).read_text(errors="replace")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log_file.close()

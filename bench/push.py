"""Push mode: N websocket sessions connected to one ``parley server`` process; one run per
session whose ``step_hook`` (with an ``on_created``) writes a prompt to the session's
outbox. Latency = the driver receives the ``prompt`` frame (unix time) - the worker's
``on_created`` ran (unix time, recorded in Redis); same machine, same clock.

The prompt reaches the outbox in the script that records the hook, *before* on_created is
called, so a small negative latency is possible and honest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

from runtime.testing import free_port

from .app import ON_CREATED_KEY, WORKFLOW
from .common import Row, bench_env, load_average, pcts, print_report, verdict, wait_for
from .harness import ROOT

API_KEY = "bench-api-key"


async def _server_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("parley server exited during start-up")
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.0\r\nHost: bench\r\n\r\n")
            status = await reader.readline()
            writer.close()
            if b" 200 " in status:
                return
        except OSError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError("parley server did not become healthy")


def _start_server(url: str, port: int, partitions: int) -> subprocess.Popen[bytes]:
    log = tempfile.NamedTemporaryFile(prefix="parley-bench-server-", suffix=".log", delete=False)  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "server", "--app", "bench.app", "--redis", url,
         "--port", str(port), "--partitions", str(partitions), "--log-level", "WARNING"],
        cwd=ROOT, env={**os.environ, "PARLEY_API_KEY": API_KEY},
        stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip


async def run_push(args: argparse.Namespace, n: int) -> dict[str, Any]:
    from server.sessions import Sessions  # the server package; push mode needs it

    os.environ["PARLEY_BENCH_RECORD_ON_CREATED"] = "1"  # read by the bench app in workers
    rate = 200.0
    async with bench_env(args) as env:
        port = args.server_port or free_port()
        server = _start_server(env.url, port, args.partitions)
        sockets: list[ClientConnection] = []
        try:
            await _server_ready(port, server)
            sessions = Sessions(env.rt)
            sids = [await sessions.create() for _ in range(n)]
            received: dict[str, float] = {}
            errors: list[str] = []
            base = f"ws://127.0.0.1:{port}/ws/sessions/"
            for i in range(0, n, 100):  # connect in batches
                sockets += await asyncio.gather(
                    *(connect(f"{base}{sid}?after=0-0") for sid in sids[i : i + 100])
                )
            readers = [asyncio.create_task(_read(ws, received, errors)) for ws in sockets]
            await asyncio.sleep(1.0)  # let every socket's outbox tail start (measuring setup)
            server_rss_kb = _rss_kb(server.pid)
            loop = asyncio.get_running_loop()
            t0 = loop.time()

            async def start(i: int) -> None:
                await asyncio.sleep(max(0.0, t0 + i / rate - loop.time()))
                await env.rt.start(WORKFLOW, None, True, session=sids[i])

            await asyncio.gather(*(start(i) for i in range(n)))
            try:
                await wait_for(lambda: _have(received, n), 30 + n / rate, "prompt frames")
            except TimeoutError as exc:
                errors.append(str(exc))
            created_raw: Any = await env.observer.client.hgetall(ON_CREATED_KEY)
            for task in readers:
                task.cancel()
            server_rss_kb_after = _rss_kb(server.pid)
        finally:
            for ws in sockets:
                await ws.close()
            server.terminate()
            server.wait(timeout=15)
    created = {k.decode(): float(v) for k, v in created_raw.items()}
    lat = [(received[t] - created[t]) * 1000 for t in received if t in created]
    p = pcts(lat)
    ok = p["p99"] <= 20 if lat else None
    result: dict[str, Any] = {
        "bench": "hitl-push", "sessions": n, "workers": args.workers, "load_avg": load_average(),
        "prompts_received": len(received), "on_created_calls": len(created),
        "push_latency_ms": p, "start_rate": rate, "errors": errors[:3],
        "socket_errors": len(errors), "over_20ms": sum(1 for x in lat if x > 20),
        "server_rss_kb": [server_rss_kb, server_rss_kb_after],
    }  # fmt: skip
    rows: list[Row] = [
        ("prompts received", f"{len(received)}/{n}", f"{n}/{n}", verdict(len(received) == n)),
        ("on_created -> prompt frame p50/p99/max ms", f"{p['p50']}/{p['p99']}/{p['max']}",
         "p99 <= 20", verdict(ok)),
        ("prompts later than 20 ms", str(result["over_20ms"]), "", ""),
        ("sockets closed by the server with an error", str(len(errors)), "0", verdict(not errors)),
        ("server RSS KB connected -> prompted", f"{server_rss_kb} -> {server_rss_kb_after}",
         "", ""),
    ]  # fmt: skip
    notes = [
        f"{n} sockets connected before the runs start; runs started at {rate:g}/s",
        f"load average at the end: {result['load_avg']} (shared machine)",
    ]
    print_report("parley prompt push benchmark", rows, notes, result)
    return result


async def _have(received: dict[str, float], n: int) -> bool:
    return len(received) >= n


async def _read(ws: ClientConnection, received: dict[str, float], errors: list[str]) -> None:
    try:
        async for raw in ws:
            now = time.time()
            frame = orjson.loads(raw)
            if frame.get("type") == "prompt" and frame.get("token"):
                received.setdefault(frame["token"], now)
    except Exception as exc:
        errors.append(f"socket: {exc!r}")


def _rss_kb(pid: int) -> int:
    from .harness import proc_rss_kb

    return proc_rss_kb(pid)

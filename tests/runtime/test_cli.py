"""The operations CLI, run as a real process against real Redis; its output is read."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import Runtime, Worker, step, step_hook, workflow
from runtime.errors import UsageError
from runtime.settings import Settings
from tests.processes import (
    PARTITIONS,
    ROOT,
    check_unimportable_apps_refused,
    parley_with,
    without_module,
)
from tests.raw_redis import raw


@step
async def cli_ask() -> Any:
    return await step_hook("approve", prompt="Approve?")


@workflow(name="cli_wf")
async def cli_wf() -> Any:
    return await cli_ask()


def parley(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return parley_on(*args, "--redis", redis_url, "--partitions", str(PARTITIONS))


def parley_on(*args: str) -> subprocess.CompletedProcess[str]:
    """The command with ``args`` only (the store options among them)."""
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_runs_and_hooks_commands(redis_url: str) -> None:
    async with Runtime(redis_url, partitions=PARTITIONS) as rt:
        worker = Worker(rt)
        answered, waiting, doomed = [await rt.start(cli_wf) for _ in range(3)]
        await worker.drain()

        listed = json.loads(parley(redis_url, "runs", "list", "--json").stdout)
        assert {r["run_id"] for r in listed} == {answered, waiting, doomed}
        assert {r["status"] for r in listed} == {"suspended"}

        hooks = json.loads(parley(redis_url, "hooks", "list", "--json").stdout)
        token = next(h["token"] for h in hooks if h["run_id"] == answered)
        assert len(hooks) == 3 and hooks[0]["prompt"] == "Approve?"

        out = parley(redis_url, "hooks", "resume", token, "--payload", '{"ok": true}')
        assert out.returncode == 0 and out.stdout.strip() == "answer recorded"
        again = parley(redis_url, "hooks", "resume", token, "--payload", '{"ok": false}')
        assert again.returncode == 1 and "different answer" in again.stderr
        bad = parley(redis_url, "hooks", "resume", token, "--payload", "{nope")
        assert bad.returncode == 1 and "--payload must be JSON" in bad.stderr

        cancelled = parley(redis_url, "runs", "cancel", doomed, "--json")
        assert json.loads(cancelled.stdout) == {"run_id": doomed, "status": "cancelled"}
        await worker.drain()

        table = parley(redis_url, "runs", "list").stdout.splitlines()
        assert table[0].split() == [
            "RUN",
            "WORKFLOW",
            "STATUS",
            "VERSION",
            "CREATED",
            "SESSION",
            "TAGS",
        ]
        statuses = {line.split()[0]: line.split()[2] for line in table[1:]}
        assert statuses == {answered: "completed", waiting: "suspended", doomed: "cancelled"}
        only = json.loads(
            parley(redis_url, "runs", "list", "--status", "completed", "--json").stdout
        )
        assert [r["run_id"] for r in only] == [answered]

        shown = parley(redis_url, "runs", "show", waiting).stdout
        assert "status    suspended" in shown and "hook.created" in shown
        assert "pending hooks" in shown and f"{waiting}:cli_ask-0.approve.0" in shown
        detail = json.loads(parley(redis_url, "runs", "show", answered, "--json").stdout)
        assert detail["result"] == {"ok": True}
        assert [e["type"] for e in detail["events"]][-1] == "workflow.completed"
        # compacted (its log and hooks in one archive): shown the same
        compacted = parley(redis_url, "runs", "compact", "--json")
        assert json.loads(compacted.stdout) == {"compacted": 1}, compacted.stderr
        assert json.loads(parley(redis_url, "runs", "show", answered, "--json").stdout) == detail
        # (the CLI process that cancelled it compacted it when it closed its store)
        keys = raw(rt).run_keys(doomed)
        assert await raw(rt).client.exists(keys.events, keys.hooks) == 0
        gone = json.loads(parley(redis_url, "runs", "show", doomed, "--json").stdout)
        assert [e["type"] for e in gone["events"]][-1] == "workflow.cancelled"

        missing = parley(redis_url, "runs", "show", "r-" + "0" * 24, "--json")
        assert missing.returncode == 1 and json.loads(missing.stdout)["error"] == "run_not_found"


async def test_runs_and_hooks_listed_by_tag(redis_url: str) -> None:
    async with Runtime(redis_url, partitions=PARTITIONS) as rt:
        worker = Worker(rt)
        acme = await rt.start(cli_wf, tags={"customer": "acme"})
        other = await rt.start(cli_wf, tags={"customer": "globex"})
        await worker.drain()
    runs = json.loads(parley(redis_url, "runs", "list", "--tag", "customer=acme", "--json").stdout)
    assert [r["run_id"] for r in runs] == [acme]
    table = parley(redis_url, "runs", "list", "--tag", "customer=globex").stdout.splitlines()
    assert [line.split()[0] for line in table[1:]] == [other]
    assert table[1].split()[-1] == "customer=globex"
    hooks = json.loads(
        parley(redis_url, "hooks", "list", "--tag", "customer=acme", "--json").stdout
    )
    assert [h["run_id"] for h in hooks] == [acme]
    bad = parley(redis_url, "runs", "list", "--tag", "customer:acme")
    assert bad.returncode == 1 and "expected a tag as key=value" in bad.stderr


async def test_hooks_resume_refuses_an_integer_beyond_64_bits(redis_url: str) -> None:
    """Read exactly, as the server reads a body: orjson alone would turn 2**64 + 1 into the
    float 1.8446744073709552e+19 and record that, instead of refusing it by its value."""
    async with Runtime(redis_url, partitions=PARTITIONS) as rt:
        run_id = await rt.start(cli_wf)
        await Worker(rt).drain()
        [pending] = await rt.list_hooks(run_id=run_id)
        out = parley(redis_url, "hooks", "resume", pending.token, "--payload", str(2**64 + 1))
        assert out.returncode == 1 and "within ±2**53" in out.stderr, out
        assert "18446744073709551617" in out.stderr
        assert [e for e in await rt.events(run_id) if e.type == "hook.received"] == []


@pytest.mark.parametrize(
    ("store", "error"),
    [
        (("--redis", "redis://127.0.0.1:1/0"), "store_unavailable"),
        (("--redis", "redis:/typo"), "usage_error"),
        (("--partitions", "0", "--redis", "redis://127.0.0.1:1/0"), "usage_error"),
    ],
    ids=["unreachable", "bad-url", "bad-partitions"],
)
def test_a_store_that_cannot_be_used_is_an_error_not_a_traceback(
    store: tuple[str, ...], error: str
) -> None:
    """The store's URL, partitions and connection fail before any command runs: each
    command reports that as it reports its other errors."""
    listed = parley_on("runs", "list", "--json", *store)
    assert listed.returncode == 1 and "Traceback" not in listed.stderr, listed.stderr
    assert json.loads(listed.stdout)["error"] == error
    plain = parley_on("hooks", "list", *store)
    assert plain.returncode == 1 and plain.stderr.startswith("error: "), plain.stderr
    replayed = parley_on(
        "replay", "--app", "tests.apps.hitl_app", "r-" + "0" * 24, "--json", *store
    )
    assert replayed.returncode == 2 and "Traceback" not in replayed.stderr, replayed.stderr
    assert json.loads(replayed.stdout)["error"] == error
    worker = parley_on("worker", "--app", "tests.apps.hitl_app", *store)
    assert worker.returncode == 2 and worker.stderr.startswith("parley worker: "), worker.stderr


def test_runs_list_refuses_a_limit_below_one() -> None:
    for limit in ("-3", "0", "many"):
        out = parley_on("runs", "list", "--limit", limit, "--redis", "redis://127.0.0.1:1/0")
        assert out.returncode == 2, out
        assert f"--limit: expected a positive integer, got {limit!r}" in out.stderr


def test_a_worker_refuses_a_concurrency_below_one() -> None:
    """A worker with no execution slot would start, say it is ready and execute nothing."""
    for value in ("0", "-4", "many"):
        out = parley_on(
            "worker", "--app", "tests.apps.hitl_app", "--allow-memory", "--concurrency", value
        )
        assert out.returncode == 2, out
        assert f"--concurrency: expected a positive integer, got {value!r}" in out.stderr
    for concurrency in (0, -4):
        with pytest.raises(UsageError, match="concurrency must be at least 1"):
            Worker(Runtime("memory://"), concurrency=concurrency)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PARLEY_PARTITIONS", "abc"),
        ("PARLEY_EVENT_LOOP", "trio"),
        ("PARLEY_LINK_KEYS", "nokeyhere"),
        ("PARLEY_REQUEST_TIMEOUT", "-1"),
        ("PARLEY_METRICS_PORT", "nine"),
        ("PARLEY_LOG_LEVEL", "verbose"),
    ],
)
def test_a_malformed_setting_is_one_line_not_a_traceback(name: str, value: str) -> None:
    out = parley_with({name: value}, "runs", "list", "--redis", "redis://127.0.0.1:1/0")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-400:]
    assert out.stderr.startswith(f"parley: {name}") and out.stderr.count("\n") == 1, out.stderr
    helped = parley_with({name: value}, "worker", "--help")
    assert helped.returncode == 0 and "--concurrency" in helped.stdout, helped.stderr[-400:]


def test_a_log_level_is_one_of_loggings_names() -> None:
    out = parley_on("runs", "list", "--log-level", "loud", "--redis", "redis://127.0.0.1:1/0")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-400:]
    known = ", ".join(logging.getLevelNamesMapping())
    assert out.stderr.splitlines()[-1] == (  # the option named once, as argparse names it
        f"parley runs list: error: argument --log-level: expected one of {known} (any "
        "case), got 'loud'"
    ), out.stderr
    assert Settings.from_env({"PARLEY_LOG_LEVEL": "debug"}).log_level == "DEBUG"
    with pytest.raises(ValueError, match="PARLEY_LOG_LEVEL must be one of"):
        Settings.from_env({"PARLEY_LOG_LEVEL": "verbose"})


@pytest.mark.parametrize(
    ("name", "value"), [("PARLEY_LOG_FORMAT", "jsonl"), ("PARLEY_TRACING", "enabled")]
)
def test_an_unknown_value_is_refused_not_ignored(name: str, value: str) -> None:
    out = parley_with({name: value}, "runs", "list", "--redis", "redis://127.0.0.1:1/0")
    assert out.returncode == 2 and out.stderr.startswith(f"parley: {name} must be one of")
    assert f"got {value!r}" in out.stderr, out.stderr


def test_the_log_format_and_tracing_take_their_known_values() -> None:
    assert Settings.from_env({}).log_format == "text" and not Settings.from_env({}).tracing
    assert Settings.from_env({"PARLEY_LOG_FORMAT": "JSON"}).log_format == "json"
    for on in ("1", "true", "Yes", "on"):
        assert Settings.from_env({"PARLEY_TRACING": on}).tracing
    for off in ("0", "false", "no", "OFF", ""):
        assert not Settings.from_env({"PARLEY_TRACING": off}).tracing


def test_the_websocket_frame_rate_is_set_from_the_environment() -> None:
    assert (Settings.from_env({}).ws_rate, Settings.from_env({}).ws_burst) == (10.0, 20)
    settings = Settings.from_env({"PARLEY_WS_RATE": "0.25", "PARLEY_WS_BURST": "1"})
    assert (settings.ws_rate, settings.ws_burst) == (0.25, 1)


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("PARLEY_WS_RATE", "fast", "PARLEY_WS_RATE must be a number of frames per second"),
        ("PARLEY_WS_RATE", "0", "PARLEY_WS_RATE must be a positive number of frames per second"),
        ("PARLEY_WS_BURST", "0", "PARLEY_WS_BURST must be a whole number of frames, 1 or more"),
        ("PARLEY_WS_BURST", "2.5", "PARLEY_WS_BURST must be an integer"),
    ],
)
def test_a_bad_websocket_frame_rate_is_refused_with_its_name(
    name: str, value: str, said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        Settings.from_env({name: value})
    out = parley_with(
        {name: value, "PARLEY_API_KEY": "k"}, "server", "--redis", "redis://127.0.0.1:1/0"
    )
    assert out.returncode == 2 and out.stderr.startswith(f"parley: {said}"), out.stderr


def test_a_redis_url_naming_another_kind_of_server_is_an_error_not_a_traceback() -> None:
    """A URL whose port is an HTTP server's (a typo, a port taken meanwhile): what answers
    does not speak Redis' protocol. Before, redis-py's InvalidResponse ("got 'H' as reply
    type byte") was a traceback; now it is the store being unavailable, said in one line."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"redis://127.0.0.1:{server.server_address[1]}/0"
        out = parley_on("hooks", "list", "--redis", url)
    finally:
        server.shutdown()
        server.server_close()
    assert out.returncode == 1 and out.stderr.startswith("error: "), out.stderr
    assert "unavailable" in out.stderr


@pytest.mark.parametrize(
    ("prefix", "command"),
    [
        ("parley worker: ", ("worker", "--allow-memory")),
        ("error: ", ("replay", "r-" + "0" * 24, "--redis", "memory://")),
    ],
    ids=["worker", "replay"],
)
def test_an_app_that_does_not_import_is_one_line_not_a_traceback(
    tmp_path: Path, prefix: str, command: tuple[str, ...]
) -> None:
    check_unimportable_apps_refused(tmp_path, prefix, *command)


@pytest.mark.parametrize("port", ["-1", "65536", "99999999999999999999"])
def test_a_metrics_port_out_of_range_is_one_line_not_a_traceback(port: str) -> None:
    """Over 65535, bind() raised an OverflowError (a traceback, exit 1); a negative one was
    said as a port taken ("Servname not supported"). Now either, as the option or as the
    variable, is a line saying what a metrics port may be, exit 2."""
    worker = ("worker", "--app", "tests.apps.hitl_app", "--allow-memory")
    given = parley_with({}, *worker, "--metrics-port", port)
    assert given.returncode == 2 and "Traceback" not in given.stderr, given.stderr[-600:]
    assert given.stderr.splitlines()[-1] == (  # the option named once, as argparse names it
        f"parley worker: error: argument --metrics-port: expected a port 1-65535 (0: no "
        f"metrics), got {port!r}"
    ), given.stderr
    from_env = parley_with({"PARLEY_METRICS_PORT": port}, *worker)
    assert from_env.returncode == 2, from_env.stderr[-600:]
    assert from_env.stderr == (
        f"parley: PARLEY_METRICS_PORT must be a port 1-65535 (0: no metrics), got {port!r}\n"
    ), from_env.stderr[-600:]


def test_a_metrics_port_is_0_to_65535() -> None:
    for value, port in (("", 0), ("0", 0), ("1", 1), ("65535", 65535)):
        assert Settings.from_env({"PARLEY_METRICS_PORT": value}).metrics_port == port
    assert Settings.from_env({}).metrics_port == 0
    with pytest.raises(ValueError, match=r"PARLEY_METRICS_PORT must be a port 1-65535"):
        Settings.from_env({"PARLEY_METRICS_PORT": "nine"})


def test_a_metrics_port_taken_is_one_line_not_a_traceback() -> None:
    """Said before the worker says it started, naming where the port was given."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        worker = ("worker", "--app", "tests.apps.hitl_app", "--allow-memory")
        given = parley_with({}, *worker, "--metrics-port", str(port))
        from_env = parley_with({"PARLEY_METRICS_PORT": str(port)}, *worker)
    for out, option in (
        (given, f"--metrics-port {port}"),
        (from_env, f"PARLEY_METRICS_PORT={port}"),
    ):
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr[-600:]
        assert out.stderr.startswith(
            f"parley worker: {option}: expected a port free to serve metrics on, got "
            f"0.0.0.0:{port}: [Errno 98] Address already in use"
        ), out.stderr


@pytest.mark.parametrize(
    ("setting", "missing"),
    [
        ({"PARLEY_TRACING": "1"}, "opentelemetry"),
        ({"PARLEY_TRACING_FILE": "spans.jsonl"}, "opentelemetry.sdk"),
    ],
    ids=["tracing", "tracing-file"],
)
def test_tracing_without_opentelemetry_is_one_line_not_a_traceback(
    tmp_path: Path, setting: dict[str, str], missing: str
) -> None:
    """Tracing asked for where the ``otel`` extra is not installed: refused before the
    worker starts, as its other configuration errors are. tracing.configure ran outside
    the handled region, and its UsageError was a traceback (exit 1)."""
    env = {**without_module(tmp_path, missing), **setting}
    out = parley_with(env, "worker", "--app", "tests.apps.hitl_app", "--allow-memory")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-600:]
    [name] = setting
    assert out.stderr.startswith(f"parley worker: {name}"), out.stderr
    assert out.stderr.count("\n") == 1 and "pip install 'parley[otel]'" in out.stderr

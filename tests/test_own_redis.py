"""The test suite owns the Redis it flushes (issue 13, item 10): without
``PARLEY_TEST_REDIS`` a session starts its own redis-server; a given database is taken
only when it is empty, so the suite never deletes data it did not write.

Each test runs ``tests/redis_probe.py`` in a pytest session of its own and looks at what
that session did."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis

from tests.processes import ROOT
from tests.redis_servers import RedisServer

pytestmark = pytest.mark.e2e


def _session(
    given_url: str | None, *options: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """A pytest session of the probe; ``given_url`` as ``PARLEY_TEST_REDIS`` (or none)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PARLEY_TEST_REDIS"))
    }
    if given_url is not None:
        env["PARLEY_TEST_REDIS"] = given_url
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         *options, "tests/redis_probe.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PROBE ")]
    probe = orjson.loads(lines[0].removeprefix("PROBE ")) if lines else {}
    return proc, probe


@pytest.fixture
def someone_elses_redis() -> Iterator[RedisServer]:
    """A Redis the sessions under test did not start, with data in db 0."""
    server = RedisServer("--appendonly", "no")
    client = redis.Redis(port=server.port)
    client.set("sentinel", "somebody's data")
    client.close()
    yield server
    server.stop()


def _sentinel(server: RedisServer) -> bytes | None:
    client = redis.Redis(port=server.port)
    try:
        value = client.get("sentinel")
        assert value is None or isinstance(value, bytes)
        return value
    finally:
        client.close()


def test_without_a_given_url_the_session_starts_and_stops_its_own_redis(
    someone_elses_redis: RedisServer,
) -> None:
    proc, probe = _session(None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"the session's Redis: {probe}")
    # the server its tests used is a child process of that pytest session ...
    assert probe["server_parent"] == probe["pytest_pid"], probe
    assert probe["port"] not in (6379, someone_elses_redis.port)
    # ... and it is gone with the session
    gone = redis.Redis(port=probe["port"], socket_connect_timeout=1)
    with pytest.raises(redis.ConnectionError):
        gone.ping()
    gone.close()
    assert _sentinel(someone_elses_redis) == b"somebody's data"


def test_a_given_database_with_data_in_it_is_refused_and_left_alone(
    someone_elses_redis: RedisServer,
) -> None:
    proc, probe = _session(someone_elses_redis.url)  # db 0, where the sentinel is
    output = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "that database is not empty (1 keys)" in output, output
    assert "unset PARLEY_TEST_REDIS" in output, output
    assert probe == {}, "no test ran"
    assert _sentinel(someone_elses_redis) == b"somebody's data"


def test_a_given_empty_database_is_used_and_left_empty(
    someone_elses_redis: RedisServer,
) -> None:
    url = f"redis://127.0.0.1:{someone_elses_redis.port}/3"
    proc, probe = _session(url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert probe["url"] == url
    client = redis.Redis(port=someone_elses_redis.port, db=3)
    try:
        assert client.dbsize() == 0  # what the probe wrote was flushed
    finally:
        client.close()
    assert _sentinel(someone_elses_redis) == b"somebody's data"  # another db: untouched


def test_a_given_database_is_refused_to_a_session_of_several_processes(
    someone_elses_redis: RedisServer,
) -> None:
    """``scripts/test`` runs the suite in two processes (pytest-xdist): each would flush the
    one database given around its own tests, in the middle of the other's."""
    url = f"redis://127.0.0.1:{someone_elses_redis.port}/3"
    proc, probe = _session(url, "-n", "2")
    output = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "-n 2 would run the tests in several processes sharing it" in output, output
    assert probe == {}, "no test ran"
    proc, probe = _session(url, "-n", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert probe["url"] == url

"""``parley server``'s startup errors, run as a real process: each is a line, exit 2."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.processes import check_unimportable_apps_refused, parley_with, without_module

from .conftest import API_KEY


def test_an_app_that_does_not_import_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as taken:  # were it to start anyway, it fails at once (status 3)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        check_unimportable_apps_refused(
            tmp_path,
            "parley server: ",
            *("server", "--redis", "memory://", "--port", port),
            env={"PARLEY_API_KEY": API_KEY},
        )


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
    server starts, as its other configuration errors are (it was a traceback, exit 1)."""
    with socket.socket() as taken:  # were it to start anyway, it fails at once (status 3)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        env = {**without_module(tmp_path, missing), **setting, "PARLEY_API_KEY": API_KEY}
        out = parley_with(env, "server", "--redis", "memory://", "--port", port)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-600:]
    [name] = setting
    assert out.stderr.startswith(f"parley server: {name}"), out.stderr
    assert out.stderr.count("\n") == 1 and "pip install 'parley[otel]'" in out.stderr

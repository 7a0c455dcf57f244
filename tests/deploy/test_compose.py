"""compose.yaml cannot run here (no Docker), so it is checked against the real CLI and
settings: the commands parse, the modules import, the ports and health checks match,
and every environment variable it sets is one the code reads."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


def _settings_read_by_the_code() -> set[str]:
    # env["X"], env.get("X"), getenv("X"), or a settings helper's _choice(env, "X", ...)
    pattern = re.compile(r"""(?:environ|env)(?:\.get\(|\(|\[|,)\s*["']([A-Z_]+)["']""")
    names: set[str] = set()
    for folder in ("runtime", "server", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(pattern.findall(path.read_text()))
    return names


def test_services(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"redis", "server", "worker"}
    assert compose["services"]["worker"]["deploy"]["replicas"] > 1
    redis_cmd = compose["services"]["redis"]["command"]
    assert redis_cmd[redis_cmd.index("--appendonly") + 1] == "yes"
    assert "redis-data:/data" in compose["services"]["redis"]["volumes"]
    for name, service in compose["services"].items():
        assert "healthcheck" in service, name


@pytest.mark.parametrize("service", ["server", "worker"])
def test_commands_parse_with_the_real_cli(compose: dict[str, Any], service: str) -> None:
    command = compose["services"][service]["command"]
    assert command[0] == "parley"
    args = build_parser().parse_args(command[1:])
    assert args.command == service
    for module in args.app:
        importlib.import_module(module)  # the app the container would load exists
    assert compose["services"][service]["build"] == "."


def test_ports_and_health_checks_match(compose: dict[str, Any]) -> None:
    server = compose["services"]["server"]
    args = build_parser().parse_args(server["command"][1:])
    assert server["ports"] == [f"{args.port}:{args.port}"]
    assert f"127.0.0.1:{args.port}/healthz" in " ".join(server["healthcheck"]["test"])
    worker = compose["services"]["worker"]
    wargs = build_parser().parse_args(worker["command"][1:])
    assert wargs.metrics_port and f":{wargs.metrics_port}/metrics" in " ".join(
        worker["healthcheck"]["test"]
    )


def test_environment_names_are_read_by_the_code(compose: dict[str, Any]) -> None:
    known = _settings_read_by_the_code()
    for name, service in compose["services"].items():
        for variable in service.get("environment", {}):
            assert variable in known, f"{name} sets {variable}, which nothing reads"
        url = service.get("environment", {}).get("REDIS_URL")
        if url is not None:
            assert url.startswith("redis://redis:6379"), url  # the redis service


def test_dockerfile_installs_the_built_wheel_not_the_source_tree() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for folder in ("runtime", "server", "examples", "widget"):
        assert f"COPY {folder} ./{folder}" in dockerfile
    assert "pip wheel --no-cache-dir --no-deps --wheel-dir /dist ." in dockerfile
    assert "pip install --no-cache-dir /dist/*.whl" in dockerfile
    assert "-e ." not in dockerfile and "EXPOSE 8000 9100" in dockerfile
    # what the wheel install is proven to serve: tests/deploy/test_wheel.py

"""API keys with names and scopes: every endpoint, tested for each role (admin, operator,
reader), and the keys' configuration."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from runtime.settings import Settings
from server.auth import (
    ApiKey,
    KeyConfigError,
    KeyRing,
    Scope,
    keys_from_settings,
    make_key,
    parse_keys,
)

from .conftest import API_KEY, events, make_client, start_approval, wait_run

OPERATOR = "operator-secret-0123456789"
READER = "reader-secret-0123456789"
KEYS = {"admin": API_KEY, "operator": OPERATOR, "reader": READER}
LINK_KEYS = (("k1", "link-secret-0123456789"),)


@pytest.fixture
def client(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PARLEY_DEMO_CHUNK_DELAY", "0")
    keys = (ApiKey("ops", Scope.OPERATOR, OPERATOR), ApiKey("auditor", Scope.READER, READER))
    with make_client(redis_url, api_keys=keys, link_keys=LINK_KEYS) as c:
        yield c


# Every authenticated endpoint: (method, path with {run_id}/{token}, body, roles allowed).
ENDPOINTS: list[tuple[str, str, Any, set[str]]] = [
    ("POST", "/api/runs", {"workflow": "srv_echo", "args": [1]}, {"admin"}),
    ("GET", "/api/runs", None, {"admin", "operator", "reader"}),
    ("GET", "/api/runs/{run_id}", None, {"admin", "operator", "reader"}),
    ("GET", "/api/runs/{run_id}/events", None, {"admin", "operator", "reader"}),
    ("POST", "/api/runs/{run_id}/cancel", {}, {"admin", "operator"}),
    ("POST", "/api/runs/{run_id}/restart", None, {"admin"}),
    ("POST", "/api/runs/{run_id}/retry", None, {"admin", "operator"}),
    ("GET", "/api/hooks", None, {"admin", "operator", "reader"}),
    ("POST", "/api/hooks/{token}", {"payload": {"ok": True}}, {"admin", "operator"}),
    ("POST", "/api/hooks/{token}/link", {}, {"admin", "operator"}),
    ("GET", "/api/keys", None, {"admin"}),
    ("GET", "/api/whoami", None, {"admin", "operator", "reader"}),
    ("GET", "/api/stats/history", None, {"admin", "operator", "reader"}),
    ("GET", "/api/live", None, {"admin", "operator", "reader"}),
]
# Endpoints that need no key.
OPEN = {("POST", "/api/sessions"), ("GET", "/a/{link}"), ("POST", "/a/{link}")}


def test_every_api_endpoint_is_in_the_role_matrix(client: TestClient) -> None:
    routes = {
        (method, route.path)
        for route in client.app.routes  # type: ignore[attr-defined]
        if isinstance(route, Route) and route.path.startswith(("/api", "/a/"))
        for method in (route.methods or set()) - {"HEAD"}
    }
    assert routes == {(m, p) for m, p, _, _ in ENDPOINTS} | OPEN


def _call(client: TestClient, method: str, path: str, body: Any, key: str) -> Any:
    headers = {"Authorization": f"Bearer {key}"}
    if path == "/api/live":  # a stream: its status and first bytes
        with client.stream("GET", path, headers=headers) as r:
            first = next(r.iter_bytes()) if r.status_code == 200 else b""
            return r.status_code, first
    r = client.request(method, path, headers=headers, json=body)
    return r.status_code, r.json()


@pytest.mark.parametrize("role", ["admin", "operator", "reader"])
@pytest.mark.parametrize(
    ("method", "path", "body", "allowed"), ENDPOINTS, ids=[f"{m} {p}" for m, p, _, _ in ENDPOINTS]
)
def test_each_endpoint_for_each_role(
    client: TestClient, role: str, method: str, path: str, body: Any, allowed: set[str]
) -> None:
    run_id, token = start_approval(client)
    before = events(client, run_id)
    status, reply = _call(client, method, path.format(run_id=run_id, token=token), body, KEYS[role])
    if role in allowed:
        # a permitted retry reaches the engine, which says the run is not blocked
        ok = (400,) if path.endswith("/retry") else (200, 201)
        assert status in ok, (role, path, reply)
        return
    assert status == 403, (role, path, reply)
    assert reply["error"] == "forbidden"
    assert f"has scope {role!r}, which does not allow" in reply["message"]
    # A refused call changed nothing.
    assert events(client, run_id) == before
    run = client.get(f"/api/runs/{run_id}", headers={"Authorization": f"Bearer {API_KEY}"}).json()
    assert run["status"] == "suspended" and [h["token"] for h in run["pending_hooks"]] == [token]


def test_unknown_keys_are_401_on_every_endpoint(client: TestClient) -> None:
    for method, path, body, _ in ENDPOINTS:
        for headers in ({}, {"Authorization": "Bearer not-a-key-0123456789"}):
            r = client.request(
                method, path.format(run_id="r-" + "0" * 24, token="x"), headers=headers, json=body
            )
            assert r.status_code == 401, (method, path, r.text)


def test_answered_by_names_the_key(client: TestClient) -> None:
    run_id, token = start_approval(client)
    r = client.post(
        f"/api/hooks/{token}",
        json={"payload": {"ok": True}},
        headers={"Authorization": f"Bearer {OPERATOR}"},
    )
    assert r.status_code == 200
    wait_run(client, run_id, lambda run: run["status"] == "completed")
    [received] = [e for e in events(client, run_id) if e["type"] == "hook.received"]
    assert received["data"]["answered_by"] == "key:ops"


def test_whoami_and_keys_never_show_secrets(client: TestClient) -> None:
    me = client.get("/api/whoami", headers={"Authorization": f"Bearer {OPERATOR}"}).json()
    assert me == {
        "name": "ops",
        "scope": "operator",
        "permissions": ["answer", "cancel", "read", "retry"],
    }
    listed = client.get("/api/keys", headers={"Authorization": f"Bearer {API_KEY}"})
    assert [k["name"] for k in listed.json()["keys"]] == ["default", "ops", "auditor"]
    assert OPERATOR not in listed.text and API_KEY not in listed.text and READER not in listed.text


def test_keys_from_environment_and_file(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"name": "ci", "scope": "reader", "secret": "c" * 20}]))
    settings = Settings.from_env(
        {
            "PARLEY_API_KEY": "a" * 20,
            "PARLEY_API_KEYS": f"ops:operator:{'o' * 20}, audit:reader:{'r' * 20}",
            "PARLEY_API_KEYS_FILE": str(path),
        }
    )
    keys = keys_from_settings(settings)
    assert [(k.name, k.scope.value) for k in keys] == [
        ("default", "admin"),
        ("ops", "operator"),
        ("audit", "reader"),
        ("ci", "reader"),
    ]
    ring = KeyRing(keys)
    assert ring.authenticate("o" * 20) is keys[1]
    assert ring.authenticate("c" * 20) is keys[3]
    assert ring.authenticate("o" * 19) is None
    assert "o" * 20 not in repr(keys[1])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ops:operator", "name:scope:secret"),
        ("ops:root:" + "x" * 20, "expected admin, operator or reader"),
        ("ops:reader:short", "at least 12"),
        ("bad name:reader:" + "x" * 20, "key name"),
    ],
)
def test_bad_key_configuration_is_refused_clearly(spec: str, message: str) -> None:
    with pytest.raises(KeyConfigError, match=message) as exc:
        parse_keys(spec)
    assert "x" * 20 not in str(exc.value)


def test_duplicate_names_or_secrets_are_refused() -> None:
    with pytest.raises(KeyConfigError, match="unique"):
        KeyRing(parse_keys(f"a:reader:{'x' * 20},a:admin:{'y' * 20}"))
    with pytest.raises(KeyConfigError, match="same secret"):
        KeyRing(parse_keys(f"a:reader:{'x' * 20},b:admin:{'x' * 20}"))


def test_a_key_name_ending_in_a_newline_is_refused() -> None:
    """``^...$`` with ``match`` took "ops\\n" (``$`` matches before a final newline)."""
    with pytest.raises(KeyConfigError, match="key name"):
        make_key("ops\n", "reader", "x" * 20, where="PARLEY_API_KEYS")

"""Which pages may use the server: CORS for the widget's files and the session API, and
the websocket's Origin check, from one allow-list (PARLEY_ALLOWED_ORIGINS)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from server.origins import OriginPolicy
from tests.processes import ROOT

from .conftest import AUTH, make_client

SHOP = "https://shop.example"


@pytest.fixture
def shop_client(redis_url: str) -> Iterator[TestClient]:
    with make_client(redis_url, origins=OriginPolicy.from_list([SHOP])) as c:
        yield c


def test_allowed_origin_gets_cors_headers_on_the_widget_and_sessions(
    shop_client: TestClient,
) -> None:
    r = shop_client.get("/widget/parley-widget.js", headers={"Origin": SHOP})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == SHOP
    assert "Origin" in r.headers["vary"]
    pre = shop_client.options(
        "/api/sessions",
        headers={"Origin": SHOP, "Access-Control-Request-Method": "POST"},
    )
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == SHOP
    assert "POST" in pre.headers["access-control-allow-methods"]
    r = shop_client.post("/api/sessions", headers={"Origin": SHOP})
    assert r.status_code == 201 and r.headers["access-control-allow-origin"] == SHOP


def test_other_origins_get_no_cors_and_cannot_open_a_session(shop_client: TestClient) -> None:
    evil = "https://evil.example"
    r = shop_client.get("/widget/parley-widget.js", headers={"Origin": evil})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    pre = shop_client.options(
        "/api/sessions", headers={"Origin": evil, "Access-Control-Request-Method": "POST"}
    )
    assert pre.status_code == 403 and "access-control-allow-origin" not in pre.headers
    r = shop_client.post("/api/sessions", headers={"Origin": evil})
    assert r.status_code == 403
    body = r.json()
    assert body["error"] == "origin_not_allowed"
    assert evil in body["message"] and SHOP in body["message"]
    # the API behind the key is not for pages: no CORS there, whatever the origin
    r = shop_client.get("/api/hooks", headers={**AUTH, "Origin": SHOP})
    assert "access-control-allow-origin" not in r.headers


def test_the_servers_own_origin_and_requests_without_origin_are_allowed(
    shop_client: TestClient,
) -> None:
    own = shop_client.post("/api/sessions", headers={"Origin": "http://testserver"})
    assert own.status_code == 201
    assert shop_client.post("/api/sessions").status_code == 201  # a backend: no Origin


def test_the_websocket_checks_the_origin_with_the_same_list(shop_client: TestClient) -> None:
    session = shop_client.post("/api/sessions").json()["session_id"]
    for origin in (SHOP, "http://testserver"):
        with shop_client.websocket_connect(
            f"/ws/sessions/{session}", headers={"Origin": origin}
        ) as ws:
            assert ws.receive_json()["type"] == "ready"
    with shop_client.websocket_connect(
        f"/ws/sessions/{session}", headers={"Origin": "https://evil.example"}
    ) as ws:
        frame = ws.receive_json()
        assert frame["error"] == "origin_not_allowed"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 4403


def test_any_origin_with_a_star() -> None:
    policy = OriginPolicy.from_list(["*"])
    assert policy.allows("https://anything.example", "chat.example")
    assert OriginPolicy().allows("https://chat.example", "chat.example")
    assert not OriginPolicy().allows("https://chat.example", "other.example")
    assert not OriginPolicy().allows("null", "chat.example")


@pytest.mark.parametrize(
    "entry", ["shop.example", "https://shop.example/path", "ftp://shop.example", "https://"]
)
def test_a_malformed_allow_list_is_refused_with_what_was_expected(entry: str) -> None:
    with pytest.raises(ValueError) as error:
        OriginPolicy.from_list([SHOP, entry])
    assert "PARLEY_ALLOWED_ORIGINS" in str(error.value) and repr(entry) in str(error.value)


def test_parley_server_does_not_start_with_a_malformed_allow_list() -> None:
    env = {
        **os.environ,
        "PARLEY_API_KEY": "k-0123456789abc",
        "REDIS_URL": "memory://",
        "PARLEY_ALLOWED_ORIGINS": "https://ok.example,shop.example",
    }
    out = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "server", "--port", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "PARLEY_ALLOWED_ORIGINS" in out.stderr and "'shop.example'" in out.stderr

"""The server rides out a Redis outage: clear 503 errors while it is down, normal answers
once it is back, without a restart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from runtime import Runtime
from server import ServerConfig, create_app
from tests.redis_servers import RedisServer

from .conftest import API_KEY, AUTH

pytestmark = pytest.mark.e2e


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


def test_http_api_reports_the_outage_and_recovers(private_redis: RedisServer) -> None:
    app = create_app(
        Runtime(private_redis.url, partitions=4), API_KEY, config=ServerConfig(api_key=API_KEY)
    )
    with TestClient(app) as client:
        missing = "/api/runs/r-" + "0" * 24
        assert client.get(missing, headers=AUTH).status_code == 404
        private_redis.kill()
        down = client.get(missing, headers=AUTH)
        assert down.status_code == 503
        assert down.json()["error"] == "store_unavailable"
        assert down.headers["retry-after"] == "1"
        assert client.get("/healthz").status_code == 503
        private_redis.start()
        assert client.get(missing, headers=AUTH).status_code == 404
        assert client.get("/healthz").json() == {"status": "ok"}

"""A write whose connection to Redis failed after Redis applied it: the server must not
claim it failed. The 503 says the outcome is unknown, and the start sent again with the
same Idempotency-Key finds the run it made (one run, never two).

Real Redis behind a TCP proxy that lets commands through but drops Redis' replies: what
a stall or a connection cut mid-command does."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.faults import Proxy, proxy_in_a_thread

from .conftest import AUTH, make_client


@pytest.fixture
def proxied_url(redis_url: str) -> Iterator[tuple[str, Proxy]]:
    parts = urlsplit(redis_url)
    with proxy_in_a_thread(parts.hostname or "127.0.0.1", parts.port or 6379) as proxy:
        yield f"redis://127.0.0.1:{proxy.port}{parts.path}", proxy


def test_a_start_whose_reply_was_lost_is_unknown_and_its_retry_finds_the_run(
    proxied_url: tuple[str, Proxy], redis_url: str
) -> None:
    url, proxy = proxied_url
    headers = {**AUTH, "Idempotency-Key": "order-5521"}
    body = {"workflow": "srv_approval"}
    with make_client(url) as client:
        # A first start loads the script into Redis: the lost one must run, not get NOSCRIPT.
        warm = client.post("/api/runs", json=body, headers={**AUTH, "Idempotency-Key": "warm"})
        assert warm.status_code == 201
        proxy.drop_replies_to = b"srv_approval"  # the start script's arguments name the workflow
        lost = client.post("/api/runs", json=body, headers=headers)
        proxy.drop_replies_to = None
        assert lost.status_code == 503
        assert lost.json()["outcome"] == "unknown"
        assert "Idempotency-Key" in lost.json()["message"]
        assert lost.headers["retry-after"] == "1"
        # Redis did create the run: the 503 was right not to say "not started".
        with make_client(redis_url) as direct:
            runs = direct.get("/api/runs", headers=AUTH).json()["runs"]
        made = [r["run_id"] for r in runs if r["run_id"] != warm.json()["run_id"]]
        assert len(made) == 1
        again = client.post("/api/runs", json=body, headers=headers)
        assert again.status_code == 201
        assert again.json()["run_id"] == made[0]
        assert len(client.get("/api/runs", headers=AUTH).json()["runs"]) == 2


def test_a_read_that_failed_is_only_retried_later(
    proxied_url: tuple[str, Proxy],
) -> None:
    url, proxy = proxied_url
    with make_client(url) as client:
        started = client.post("/api/runs", json={"workflow": "srv_approval"}, headers=AUTH)
        run_id = started.json()["run_id"]
        proxy.drop_replies_to = run_id.encode()  # a read of that run's keys
        failed = client.get(f"/api/runs/{run_id}", headers=AUTH)
        proxy.drop_replies_to = None
        assert failed.status_code == 503
        assert "outcome" not in failed.json()
        assert client.get(f"/api/runs/{run_id}", headers=AUTH).status_code == 200

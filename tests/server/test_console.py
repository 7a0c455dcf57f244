"""The console's JSON routes (server.console): their query parameters."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from .conftest import AUTH


@pytest.mark.parametrize(
    "query",
    ["limit=\u00b2", "limit=\u0661", "offset=\u0661"],
    ids=["superscript-two", "arabic-indic-limit", "arabic-indic-offset"],
)
def test_a_page_parameter_other_than_ascii_digits_in_range_is_malformed(
    client: TestClient, query: str
) -> None:
    """str.isdigit() takes "²" (int() refuses it: a 500) and other scripts' digits (int()
    reads an Arabic-Indic one as 1): each is the route's 400, saying what was expected."""
    r = client.get(f"/api/runs?{query}", headers=AUTH)
    assert r.status_code == 400, (r.status_code, r.text[:200])
    body = r.json()
    assert body["error"] == "malformed"
    assert "as a whole number (digits 0-9) from" in body["message"], body


def test_ascii_page_parameters_are_taken(client: TestClient) -> None:
    r = client.get("/api/runs?limit=2&offset=0", headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["offset"] == 0


@pytest.mark.parametrize("value", ["nan", "inf", "1_0", "\u0661", "1e3", "-5"])
def test_a_time_bound_other_than_unix_seconds_is_malformed(client: TestClient, value: str) -> None:
    """float() takes each of these, and the page was a 200 filtered by nonsense (NaN
    compares false with every time: since=nan listed every run)."""
    for name in ("since", "until"):
        r = client.get(f"/api/runs?{name}={value}", headers=AUTH)
        assert r.status_code == 400, (name, value, r.status_code, r.text[:200])
        assert r.json()["error"] == "malformed"
        assert f"expected {name} in unix seconds" in r.json()["message"]


def test_unix_seconds_bound_the_page(client: TestClient) -> None:
    r = client.post("/api/runs", json={"workflow": "srv_approval"}, headers=AUTH)
    assert r.status_code == 201
    bounded = client.get("/api/runs?since=0&until=99999999999.5", headers=AUTH)
    assert len(bounded.json()["runs"]) == 1
    assert client.get("/api/runs?since=99999999999", headers=AUTH).json()["runs"] == []

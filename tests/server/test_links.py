"""Signed answer links (acceptance: a link answers its hook without an API key, once;
tampered, expired, other-hook and retired-key links are refused with a clear page and
change nothing; rotation keeps old links valid; answered_by on every path)."""

from __future__ import annotations

import base64
import html
import re
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from runtime.links import LinkSigner

from .apps import LINKS
from .conftest import AUTH, events, make_client, start_approval, wait_run

K1 = ("k1", "first-secret-0123456789")
K2 = ("k2", "second-secret-0123456789")


@pytest.fixture
def client(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PARLEY_DEMO_CHUNK_DELAY", "0")
    with make_client(redis_url, link_keys=(K1,)) as c:
        yield c


def mint(client: TestClient, token: str, **body: Any) -> dict[str, Any]:
    r = client.post(f"/api/hooks/{token}/link", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    minted: dict[str, Any] = r.json()
    return minted


def received(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events(client, run_id) if e["type"] == "hook.received"]


def test_a_link_answers_its_hook_once_without_an_api_key(client: TestClient) -> None:
    run_id, token = start_approval(client)
    minted = mint(client, token)
    assert minted["key_id"] == "k1" and minted["url"].endswith("/a/" + minted["link"])
    page = client.get(f"/a/{minted['link']}")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "Approve the refund?" in page.text and "/widget/answer-page.js" in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    assert events(client, run_id) == events(client, run_id)  # GET changed nothing
    before = events(client, run_id)
    assert [e["type"] for e in before].count("hook.received") == 0
    r = client.post(f"/a/{minted['link']}", json={"payload": {"ok": True}})  # no API key
    assert r.status_code == 200, r.text
    assert r.json()["recorded"] is True and r.json()["answered_by"] == "link:k1"
    run = wait_run(client, run_id, lambda run: run["status"] == "completed")
    assert run["result"] == {"ok": True}
    assert received(client, run_id) == [
        {"hook_id": token.split(":", 1)[1], "payload": {"ok": True}, "answered_by": "link:k1"}
    ]
    # The same link again, with the same or another answer: "already answered", no change.
    after = events(client, run_id)
    for payload in ({"ok": True}, {"ok": False}):
        again = client.post(f"/a/{minted['link']}", json={"payload": payload})
        assert again.status_code == 409, again.text
        assert again.json()["error"] == "hook_already_answered"
        assert "already answered" in again.json()["message"]
    page = client.get(f"/a/{minted['link']}")
    assert page.status_code == 409 and "Already answered" in page.text
    assert events(client, run_id) == after


def test_answer_schema_is_enforced_through_the_link(client: TestClient) -> None:
    run_id, token = start_approval(client)
    link = mint(client, token)["link"]
    before = events(client, run_id)
    r = client.post(f"/a/{link}", json={"payload": {"ok": "yes"}})
    assert (r.status_code, r.json()["error"]) == (422, "invalid_payload")
    assert events(client, run_id) == before
    assert client.post(f"/a/{link}", json={"payload": {"ok": False}}).status_code == 200


def test_an_answer_refused_for_itself_says_so_in_plain_words(client: TestClient) -> None:
    """The answer page shows a refused answer's ``message``: what happened and that the
    person may correct it and send it again; the runtime's wording (the schema's path,
    byte counts) is in ``detail``, the code in ``error`` and ``reason`` as before."""
    run_id, token = start_approval(client)
    link = mint(client, token)["link"]
    before = events(client, run_id)
    r = client.post(f"/a/{link}", json={"payload": {"ok": "yes"}})
    assert (r.status_code, r.json()["error"], r.json()["reason"]) == (
        422,
        "invalid_payload",
        "invalid_payload",
    )
    assert r.json()["message"].startswith("This answer does not fit the question")
    assert "schema" in r.json()["detail"] and "schema" not in r.json()["message"]
    assert r.json()["run_id"] == run_id
    big = client.post(f"/a/{link}", json={"payload": "x" * 300_000})
    assert (big.status_code, big.json()["error"]) == (413, "request_too_large"), big.text
    assert big.json()["message"].startswith("This answer is too long")
    assert "bytes" in big.json()["detail"] and "bytes" not in big.json()["message"]
    assert events(client, run_id) == before
    assert client.post(f"/a/{link}", json={"payload": {"ok": False}}).status_code == 200


def _parts(link: str) -> list[str]:
    return link.split(".")


def _claims(link: str) -> dict[str, Any]:
    payload = _parts(link)[2]
    loaded: dict[str, Any] = orjson.loads(base64.urlsafe_b64decode(payload + "=="))
    return loaded


def _encode(claims: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()


def test_tampered_and_other_hook_links_are_refused_and_change_nothing(
    client: TestClient,
) -> None:
    run_a, token_a = start_approval(client)
    run_b, token_b = start_approval(client)
    link_a = mint(client, token_a)["link"]
    v, kid, payload, sig = _parts(link_a)
    flipped = sig[:-2] + ("A" if sig[-2] != "A" else "B") + sig[-1]
    other_hook = _encode({**_claims(link_a), "t": token_b})  # A's signature, B's token
    longer = _encode({**_claims(link_a), "x": 2**41})  # a later expiry, A's signature
    cases = {
        "bad_signature": [
            f"{v}.{kid}.{payload}.{flipped}",
            f"{v}.{kid}.{other_hook}.{sig}",
            f"{v}.{kid}.{longer}.{sig}",
        ],
        "unknown_key": [f"{v}.k9.{payload}.{sig}"],
        "malformed": [f"{v}.{kid}.{payload}", "nonsense", f"v2.{kid}.{payload}.{sig}"],
    }
    before = {run: events(client, run) for run in (run_a, run_b)}
    for reason, links in cases.items():
        for link in links:
            page = client.get(f"/a/{link}")
            assert page.status_code in (400, 403), (reason, link)
            assert "valid</h1>" in page.text, (reason, page.text)  # "not valid", "no longer"
            r = client.post(f"/a/{link}", json={"payload": {"ok": True}})
            assert r.status_code in (400, 403), (reason, r.text)
            assert r.json()["reason"] == reason, r.text
    assert {run: events(client, run) for run in (run_a, run_b)} == before
    pending = {h["token"] for h in client.get("/api/hooks", headers=AUTH).json()["hooks"]}
    assert pending == {token_a, token_b}
    # The genuine link still answers A, and only A.
    assert client.post(f"/a/{link_a}", json={"payload": {"ok": True}}).status_code == 200
    wait_run(client, run_a, lambda run: run["status"] == "completed")
    assert client.get(f"/api/runs/{run_b}", headers=AUTH).json()["status"] == "suspended"


def test_a_link_expires_with_its_hook(client: TestClient) -> None:
    run_id, token = start_approval(client, timeout=1.0)
    minted = mint(client, token)
    hook = client.get(f"/api/runs/{run_id}", headers=AUTH).json()["pending_hooks"][0]
    assert _claims(minted["link"])["x"] == int(hook["expires_at"] * 1000)
    wait_run(client, run_id, lambda run: run["status"] == "completed")
    before = events(client, run_id)
    page = client.get(f"/a/{minted['link']}")
    assert page.status_code == 410 and "This question expired" in page.text
    r = client.post(f"/a/{minted['link']}", json={"payload": {"ok": True}})
    assert r.status_code == 410 and r.json()["reason"] == "expired"
    assert events(client, run_id) == before


def test_a_link_past_its_own_expiry_is_refused(client: TestClient) -> None:
    run_id, token = start_approval(client)
    link = LinkSigner([K1]).sign(token, expires_at_ms=int(time.time() * 1000) - 1)
    page = client.get(f"/a/{link}")
    assert page.status_code == 410 and "expired" in page.text
    before = events(client, run_id)
    r = client.post(f"/a/{link}", json={"payload": {"ok": True}})
    assert (r.status_code, r.json()["reason"]) == (410, "expired")
    assert events(client, run_id) == before


def test_cancelling_the_run_revokes_its_links(client: TestClient) -> None:
    run_id, token = start_approval(client)
    link = mint(client, token)["link"]
    assert client.post(f"/api/runs/{run_id}/cancel", headers=AUTH).status_code == 200
    before = events(client, run_id)
    page = client.get(f"/a/{link}")
    assert page.status_code == 410 and "withdrawn" in page.text
    r = client.post(f"/a/{link}", json={"payload": {"ok": True}})
    assert (r.status_code, r.json()["error"]) == (410, "hook_cancelled")
    assert events(client, run_id) == before
    r = client.post(f"/api/hooks/{token}/link", json={}, headers=AUTH)
    assert (r.status_code, r.json()["error"]) == (410, "hook_not_pending")


def test_rotating_the_secret_keeps_old_links_until_the_old_key_is_retired(
    redis_url: str,
) -> None:
    with make_client(redis_url, link_keys=(K1,)) as first:
        run_1, token_1 = start_approval(first)
        run_2, token_2 = start_approval(first)
        old_1, old_2 = mint(first, token_1)["link"], mint(first, token_2)["link"]
    # Rotated: k2 signs new links, k1 still verifies.
    with make_client(redis_url, link_keys=(K2, K1)) as rotated:
        r = rotated.post(f"/a/{old_1}", json={"payload": {"ok": True}})
        assert r.status_code == 200 and r.json()["answered_by"] == "link:k1"
        wait_run(rotated, run_1, lambda run: run["status"] == "completed")
        _, token_3 = start_approval(rotated)
        new = mint(rotated, token_3)
        assert new["key_id"] == "k2" and new["link"].startswith("v1.k2.")
    # k1 retired: its links no longer work; k2's do.
    with make_client(redis_url, link_keys=(K2,)) as retired:
        before = events(retired, run_2)
        page = retired.get(f"/a/{old_2}")
        assert page.status_code == 403 and "no longer valid" in page.text
        r = retired.post(f"/a/{old_2}", json={"payload": {"ok": True}})
        assert (r.status_code, r.json()["reason"]) == (403, "unknown_key")
        assert events(retired, run_2) == before
        r = retired.post(f"/a/{new['link']}", json={"payload": {"ok": False}})
        assert r.status_code == 200 and r.json()["answered_by"] == "link:k2"


def test_without_link_keys_links_are_off(redis_url: str) -> None:
    with make_client(redis_url) as client:
        _, token = start_approval(client)
        link = LinkSigner([K1]).sign(token)
        assert client.get(f"/a/{link}").status_code == 404
        r = client.post(f"/api/hooks/{token}/link", json={}, headers=AUTH)
        assert r.status_code == 404 and r.json()["error"] == "links_not_configured"


def test_hook_url_from_on_created_carries_the_hook_deadline(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARLEY_PUBLIC_URL", "https://parley.example.com/")
    monkeypatch.setenv("PARLEY_LINK_KEYS", f"{K1[0]}={K1[1]}")
    r = client.post(
        "/api/runs", json={"workflow": "srv_link_approval", "kwargs": {"timeout": 60}}, headers=AUTH
    )
    run_id = r.json()["run_id"]
    run = wait_run(client, run_id, lambda run: bool(run["pending_hooks"]))
    hook = run["pending_hooks"][0]
    url = LINKS[hook["token"]]
    assert url.startswith("https://parley.example.com/a/v1.k1.")
    link = url.rsplit("/", 1)[1]
    claims = _claims(link)
    assert claims == {
        "t": hook["token"],
        "x": int(hook["expires_at"] * 1000),
        "w": "alice@example.org",
    }
    r = client.post(f"/a/{link}", json={"payload": {"ok": True, "note": "fine"}})
    assert r.status_code == 200, r.text
    wait_run(client, run_id, lambda run: run["status"] == "completed")
    assert received(client, run_id)[0]["answered_by"] == "link:k1:alice@example.org"


def test_answered_by_names_the_api_key_and_the_session(client: TestClient) -> None:
    run_id, token = start_approval(client)
    assert client.post(f"/api/hooks/{token}", json={"payload": {"ok": True}}, headers=AUTH).json()[
        "recorded"
    ]
    wait_run(client, run_id, lambda run: run["status"] == "completed")
    assert received(client, run_id)[0]["answered_by"] == "key:default"
    # A chat session answering over its websocket.
    session = client.post("/api/sessions").json()["session_id"]
    r = client.post(
        "/api/runs", json={"workflow": "srv_approval", "session": session}, headers=AUTH
    )
    run_id = r.json()["run_id"]
    run = wait_run(client, run_id, lambda run: bool(run["pending_hooks"]))
    token = run["pending_hooks"][0]["token"]
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        assert ws.receive_json()["type"] == "ready"
        ws.send_json({"type": "answer", "token": token, "payload": {"ok": False}, "ref": 1})
        while (frame := ws.receive_json()).get("ref") != 1:
            pass
        assert frame["type"] == "ack" and frame["recorded"] is True
    wait_run(client, run_id, lambda run: run["status"] == "completed")
    assert received(client, run_id)[0]["answered_by"] == f"session:{session}"


def test_a_link_to_a_hook_another_wait_settled_says_it_was_withdrawn(
    client: TestClient,
) -> None:
    """first() of two hooks, one answered: the other's link says the question was
    withdrawn (410), as its answer does, and changes nothing. Before, its page failed with
    a KeyError (a 500) and its answer came back as if the answer itself were wrong."""
    r = client.post("/api/runs", json={"workflow": "srv_either"}, headers=AUTH)
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    run = wait_run(client, run_id, lambda run: len(run["pending_hooks"]) == 2)
    tokens = {h["name"]: h["token"] for h in run["pending_hooks"]}
    yes, no = (mint(client, tokens[name])["link"] for name in ("yes", "no"))
    assert client.post(f"/a/{yes}", json={"payload": "yes"}).status_code == 200
    wait_run(client, run_id, lambda run: run["status"] == "completed")
    before = events(client, run_id)
    page = client.get(f"/a/{no}")
    assert page.status_code == 410 and "withdrawn" in page.text
    r = client.post(f"/a/{no}", json={"payload": "no"})
    assert (r.status_code, r.json()["error"], r.json()["reason"]) == (410, "hook_closed", "closed")
    assert events(client, run_id) == before


# What a person must not read: the verifier's wording and the codes meant for machines.
TECHNICAL = ("expected", "signature", "base64", "v1.", "key '", "invalid_link", "_", "<", ">")


def _visible_text(page: str) -> str:
    """The text a browser shows of a page: its body, tags dropped, entities decoded."""
    body = re.sub(r"<script\b.*?</script>", " ", page.split("<body>", 1)[1], flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_a_link_that_cannot_be_used_says_so_in_plain_words(client: TestClient) -> None:
    """The answer page shows the ``message`` of a refused answer to the person: it says
    what happened and what they can do, not the verifier's technical wording (it was
    "expected an answer link 'v1.<key>.<payload>.<sig>'" and the like); the codes stay
    in ``error``, ``reason`` and the page's ``data-reason``."""
    _, token = start_approval(client)
    link = mint(client, token)["link"]
    v, kid, payload, sig = _parts(link)
    flipped = sig[:-2] + ("A" if sig[-2] != "A" else "B") + sig[-1]
    cases = {
        "malformed": (f"{v}.{kid}.{payload}", "copied incompletely"),
        "bad_signature": (f"{v}.{kid}.{payload}.{flipped}", "altered or mistyped"),
        "unknown_key": (f"{v}.k9.{payload}.{sig}", "Ask for a new link."),
        "expired": (
            LinkSigner([K1]).sign(token, expires_at_ms=int(time.time() * 1000) - 1),
            "This question expired",
        ),
    }
    for reason, (bad, plain) in cases.items():
        r = client.post(f"/a/{bad}", json={"payload": {"ok": True}})
        assert r.json()["reason"] == reason, r.text
        message = r.json()["message"]
        assert plain in message, (reason, message)
        assert not [w for w in TECHNICAL if w in message], (reason, message)
        page = client.get(f"/a/{bad}")
        assert page.status_code == r.status_code, reason
        assert f'data-reason="{reason}"' in page.text, (reason, page.text)
        shown = _visible_text(page.text)
        assert message in shown, (reason, shown)
        assert not [w for w in TECHNICAL if w in shown], (reason, shown)

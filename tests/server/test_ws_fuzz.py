"""Property-based: whatever a page sends, the gateway answers with a frame (never a crash)
and nothing changes for a run that is not the page's to answer."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from .conftest import events, start_approval

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)


def frames(victim_token: str) -> st.SearchStrategy[str | bytes]:
    objects = st.fixed_dictionaries(
        {"type": st.sampled_from(["answer", "ping", "nonsense", ""]) | st.text(max_size=10)},
        optional={
            "token": st.sampled_from([victim_token, victim_token + "x", "", ":"])
            | st.text(max_size=40),
            "payload": json_values,
            "text": st.integers() | st.none() | st.lists(st.text(max_size=3)),
            "ref": json_values,
        },
    ).map(json.dumps)
    return st.one_of(
        objects,
        json_values.map(json.dumps),
        st.text(max_size=200),
        st.binary(max_size=200),
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_frame_gets_a_reply_and_changes_nothing(client: TestClient, data: Any) -> None:
    state = _victim(client)
    frame = data.draw(frames(state["token"]))
    with client.websocket_connect(f"/ws/sessions/{state['attacker']}") as ws:
        assert ws.receive_json()["type"] == "ready"
        if isinstance(frame, bytes):
            ws.send_bytes(frame)
        else:
            ws.send_text(frame)
        reply = ws.receive_json()
        while "id" in reply:  # an entry of the session's outbox (replayed history)
            reply = ws.receive_json()
    expected, ref = _expected_reply(frame)
    assert reply["type"] in expected, (frame, reply)
    assert reply.get("ref") == ref, (frame, reply)
    if reply["type"] == "error":
        assert isinstance(reply["error"], str) and reply["message"], reply
    assert [e["id"] for e in events(client, state["run_id"])] == state["event_ids"]


def _expected_reply(frame: str | bytes) -> tuple[set[str], Any]:
    """The reply types the gateway may give to ``frame`` (sent alone on a fresh socket,
    so never rate-limited), and the ``ref`` it must echo."""
    if isinstance(frame, bytes):
        return {"error"}, None  # a binary frame
    try:
        parsed = orjson.loads(frame)  # the gateway's parser (e.g. the same integer range)
    except orjson.JSONDecodeError:
        return {"error"}, None
    if not isinstance(parsed, dict):
        return {"error"}, None
    ref = parsed.get("ref") if isinstance(parsed.get("ref"), str | int) else None
    kind = parsed.get("type")
    if kind == "ping":
        return {"pong"}, ref
    if kind == "message":  # starts the chat workflow if its text is valid
        return {"ack", "error"}, ref
    # an unknown type, or an answer to a hook that is not the attacker session's
    return {"error"}, ref


_victims: dict[int, dict[str, Any]] = {}


def _victim(client: TestClient) -> dict[str, Any]:
    """A run of another session with a pending hook, made once per client."""
    state = _victims.get(id(client))
    if state is None:
        run_id, token = start_approval(client)  # not the attacker's session's run
        state = {
            "run_id": run_id,
            "token": token,
            "event_ids": [e["id"] for e in events(client, run_id)],
            "attacker": client.post("/api/sessions").json()["session_id"],
        }
        _victims.clear()
        _victims[id(client)] = state
    return state

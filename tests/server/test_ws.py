"""The websocket gateway through Starlette's TestClient, on real Redis with a worker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from runtime import Runtime

from .conftest import AUTH, events, make_client, start_approval, wait_run

Frame = dict[str, Any]


def new_session(client: TestClient) -> str:
    r = client.post("/api/sessions")
    assert r.status_code == 201
    session: str = r.json()["session_id"]
    return session


def until(ws: Any, pred: Callable[[Frame], bool]) -> list[Frame]:
    """Frames up to and including the first one matching ``pred`` (bounded by the
    test timeout: frames arrive in order, so the match comes or the test fails)."""
    frames: list[Frame] = []
    while True:
        frame: Frame = ws.receive_json()
        frames.append(frame)
        if pred(frame):
            return frames


def converse_until_prompt(client: TestClient, ws: Any, text: str = "my worker crashed") -> Frame:
    ws.send_json({"type": "message", "text": text, "ref": "m1"})
    frames = until(ws, lambda f: f["type"] == "prompt")
    ack = next(f for f in frames if f["type"] == "ack")
    assert ack["ref"] == "m1" and ack["run_id"] == frames[-1]["run_id"]
    assert frames[-1]["state"] == "pending"
    return frames[-1]


def test_unknown_session_and_bad_after_are_refused(client: TestClient) -> None:
    with client.websocket_connect("/ws/sessions/" + "A" * 32) as ws:
        assert ws.receive_json()["error"] == "session_not_found"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 4404
    session = new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session}?after=yesterday") as ws:
        assert ws.receive_json()["error"] == "malformed"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 4400


@pytest.mark.parametrize(
    "after",
    ["18446744073709551616-0", "0-99999999999999999999", "\u0661\u0662-\u0660"],
    ids=["ms-over-2**64", "seq-over-2**64", "arabic-indic-digits"],
)
def test_an_after_redis_would_refuse_is_refused_before_ready(
    client: TestClient, after: str
) -> None:
    """Redis takes ASCII digits up to 2**64-1 in each part: any other id, let through,
    failed the first read and closed the socket as "store unavailable" (1011)."""
    session = new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session}?after={quote(after)}") as ws:
        first = ws.receive_json()
        assert first.get("error") == "malformed", first
        assert "at most 18446744073709551615" in first["message"]
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 4400


def test_the_greatest_stream_id_is_a_valid_after(client: TestClient) -> None:
    session = new_session(client)
    greatest = f"{2**64 - 1}-{2**64 - 1}"
    with client.websocket_connect(f"/ws/sessions/{session}?after={greatest}") as ws:
        assert ws.receive_json()["type"] == "ready"
        ws.send_json({"type": "ping"})
        assert ws.receive_json()["type"] == "pong"


def test_the_first_frame_tells_the_page_the_servers_limits(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARLEY_DEMO_CHUNK_DELAY", "0")
    with make_client(redis_url, max_message_chars=120, max_frame_bytes=2048) as client:
        session = new_session(client)
        with client.websocket_connect(f"/ws/sessions/{session}") as ws:
            ready = ws.receive_json()
            assert ready["type"] == "ready"
            assert ready["limits"]["max_message_chars"] == 120
            assert ready["limits"]["max_frame_bytes"] == 2048
            assert ready["limits"]["close_codes"]["unknown_session"] == 4404
            # and the server holds the page to them
            ws.send_json({"type": "message", "text": "x" * 121, "ref": 1})
            reply = ws.receive_json()
            assert reply["error"] == "message_too_large" and "120" in reply["message"]


def test_conversation_answer_and_replay(client: TestClient) -> None:
    session = new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        assert ws.receive_json()["type"] == "ready"
        prompt = converse_until_prompt(client, ws)
        assert prompt["schema"]["enum"][0] == "Parley Cloud"
        assert prompt["prompt"] == "Which product are you using?"
        ws.send_json({"type": "answer", "token": prompt["token"], "payload": "Parley Cloud"})
        frames = until(ws, lambda f: f["type"] == "status")
        assert frames[-1]["status"] == "completed"
        ack = next(f for f in frames if f["type"] == "ack")
        assert ack == {"type": "ack", "for": "answer", "token": prompt["token"], "recorded": True}
        assert any(f["type"] == "answered" and f["payload"] == "Parley Cloud" for f in frames)
        final = "".join(f["delta"] for f in frames if f["type"] == "text")
        assert final.startswith("Thanks! For Parley Cloud")
        last_id = frames[-1]["id"]
    # A reload replays the whole session once, in order; the prompt is shown as answered.
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        ws.receive_json()
        replay = until(ws, lambda f: f.get("id") == last_id)
        ids = [f["id"] for f in replay if "id" in f]
        assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
        assert len(ids) == len(set(ids))
        assert [f["state"] for f in replay if f["type"] == "prompt"] == ["received"]
        assert replay[0]["type"] == "visitor"
        # Nothing more is delivered after the last id.
        ws.send_json({"type": "ping"})
        assert ws.receive_json() == {"type": "pong"}


def test_reconnect_with_last_id_gets_only_what_is_new(client: TestClient) -> None:
    session = new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        ws.receive_json()
        prompt = converse_until_prompt(client, ws)
    # Answer over HTTP while no page is connected; the page comes back after the prompt.
    r = client.post(
        f"/api/hooks/{prompt['token']}", json={"payload": "Something else"}, headers=AUTH
    )
    assert r.status_code == 200
    with client.websocket_connect(f"/ws/sessions/{session}?after={prompt['id']}") as ws:
        assert ws.receive_json()["after"] == prompt["id"]
        frames = until(ws, lambda f: f["type"] == "status")
    assert all(f["type"] != "prompt" and f["type"] != "visitor" for f in frames)
    assert frames[0]["type"] in ("answered", "text")
    assert any(f["type"] == "answered" for f in frames)
    assert "".join(f["delta"] for f in frames if f["type"] == "text").startswith(
        "Thanks! For Something else"
    )


def test_a_message_sent_again_with_its_client_id_is_shown_and_started_once(
    client: TestClient,
) -> None:
    """A page that lost its socket before the ack sends its message again (same
    ``client_id``, on a new socket): the server acks it with the run it already started,
    even though that run is busy asking a question, and shows and starts nothing twice."""
    session = new_session(client)
    message = {"type": "message", "text": "my worker crashed", "client_id": "c-lost-ack"}
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        ws.receive_json()
        ws.send_json({**message, "ref": "m1"})
        frames = until(ws, lambda f: f["type"] == "prompt")
    first = next(f for f in frames if f["type"] == "ack")
    with client.websocket_connect(f"/ws/sessions/{session}?after={frames[-1]['id']}") as ws:
        ws.receive_json()
        ws.send_json({**message, "ref": "m2"})
        again = until(ws, lambda f: f.get("ref") == "m2")[-1]
        assert again == {**first, "ref": "m2"}
        # another message is still refused while the run waits for its answer
        ws.send_json({**message, "client_id": "c-other", "ref": "m3"})
        assert until(ws, lambda f: f.get("ref") == "m3")[-1]["error"] == "busy"
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        replay = until(ws, lambda f: f["type"] == "prompt")
    assert [f["client_id"] for f in replay if f["type"] == "visitor"] == ["c-lost-ack"]
    assert sum(f["type"] == "prompt" for f in replay) == 1


def visitor_texts(client: TestClient, session: str) -> list[str]:
    """The visitor messages the session's outbox holds (what any page would show)."""
    rt: Runtime = client.app.state.ctx.runtime  # type: ignore[attr-defined]
    assert client.portal is not None
    outbox = client.portal.call(rt.read_outbox, session)
    return [message["text"] for _id, message in outbox if message.get("type") == "visitor"]


def reply_to(ws: Any, text: str, client_id: str, ref: int) -> Frame:
    """The server's ack or error for the chat message ``text``."""
    ws.send_json({"type": "message", "text": text, "client_id": client_id, "ref": ref})
    return until(ws, lambda f: f.get("ref") == ref)[-1]


def test_a_message_whose_run_input_is_too_large_is_not_shown(redis_url: str) -> None:
    """The workflow's memory plus the message is over the run input limit: the start is
    refused, and the message (sent again, as the widget does) is never shown."""
    with make_client(redis_url, chat_workflow="srv_big_memory") as client:
        session = new_session(client)
        with client.websocket_connect(f"/ws/sessions/{session}") as ws:
            ws.receive_json()
            ack = reply_to(ws, "hello", "c1", 1)
            assert ack["type"] == "ack", ack
            wait_run(client, ack["run_id"], lambda run: run["status"] == "completed")
            for ref in range(10, 13):
                reply = reply_to(ws, "x" * 4000, "c2", ref)
                assert reply["type"] == "error" and reply["error"] == "payload_too_large", reply
        assert visitor_texts(client, session) == ["hello"]
        assert len(client.get("/api/runs", headers=AUTH).json()["runs"]) == 1


def assert_refused_unshown(client: TestClient, client_id: str, error: str) -> None:
    """A first message in a new session is refused with ``error``, and nothing is shown."""
    session = new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        ws.receive_json()
        reply = reply_to(ws, "hello", client_id, 1)
    assert reply["type"] == "error" and reply["error"] == error, reply
    assert visitor_texts(client, session) == []


def test_a_message_whose_workflow_is_not_deployed_is_not_shown(redis_url: str) -> None:
    with make_client(redis_url, chat_workflow="srv_not_deployed") as client:
        assert_refused_unshown(client, "c1", "workflow_not_found")


def test_a_socket_cannot_answer_another_sessions_hook(client: TestClient) -> None:
    session_a, session_b = new_session(client), new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session_b}") as ws_b:
        ws_b.receive_json()
        prompt_b = converse_until_prompt(client, ws_b)
    run_b = prompt_b["run_id"]
    before = events(client, run_b)
    # A hook of a run without any session is not answerable from a socket either.
    _, other_token = start_approval(client)
    with client.websocket_connect(f"/ws/sessions/{session_a}") as ws_a:
        ws_a.receive_json()
        for token in (prompt_b["token"], other_token):
            ws_a.send_json({"type": "answer", "token": token, "payload": "Parley Cloud", "ref": 9})
            reply = ws_a.receive_json()
            assert reply["type"] == "error" and reply["error"] == "forbidden", reply
            assert reply["ref"] == 9
    assert events(client, run_b) == before
    run = client.get(f"/api/runs/{run_b}", headers=AUTH).json()
    assert [h["token"] for h in run["pending_hooks"]] == [prompt_b["token"]]


def test_bad_frames_get_error_frames_and_change_nothing(client: TestClient) -> None:
    session = new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        ws.receive_json()
        prompt = converse_until_prompt(client, ws)
        token, run_id = prompt["token"], prompt["run_id"]
        before = events(client, run_id)
        bad: list[tuple[Callable[[], None], str]] = [
            (lambda: ws.send_text("{not json"), "malformed"),
            (lambda: ws.send_text("[1, 2]"), "malformed"),
            (lambda: ws.send_bytes(b'{"type": "ping"}'), "malformed"),
            (lambda: ws.send_json({"type": "launch"}), "unknown_type"),
            (lambda: ws.send_json({"no": "type"}), "unknown_type"),
            (lambda: ws.send_json({"type": "answer", "token": token}), "malformed"),
            (
                lambda: ws.send_json({"type": "answer", "token": token, "payload": "Nope"}),
                "invalid_payload",
            ),
            (
                lambda: ws.send_json({"type": "answer", "token": token, "payload": 3}),
                "invalid_payload",
            ),
            (
                lambda: ws.send_json({"type": "answer", "token": "junk", "payload": 1}),
                "invalid_token",
            ),
            (
                lambda: ws.send_text('{"type": "message", "text": "' + "x" * 70_000 + '"}'),
                "frame_too_large",
            ),
            (lambda: ws.send_json({"type": "message", "text": "hello again"}), "busy"),
            (lambda: ws.send_json({"type": "message", "text": "   "}), "invalid_message"),
        ]
        for send, code in bad:
            send()
            reply = ws.receive_json()
            assert reply["type"] == "error" and reply["error"] == code, (code, reply)
            assert reply["message"]
        assert events(client, run_id) == before
        ws.send_json({"type": "answer", "token": token, "payload": "Parley Cloud"})
        assert until(ws, lambda f: f["type"] == "status")[-1]["status"] == "completed"


def test_rate_limit_and_flood(redis_url: str) -> None:
    with make_client(redis_url, ws_rate=0.5, ws_burst=3) as client:
        session = new_session(client)
        with client.websocket_connect(f"/ws/sessions/{session}") as ws:
            ws.receive_json()
            replies = []
            for _ in range(6):
                ws.send_json({"type": "ping"})
                replies.append(ws.receive_json())
            assert [r["type"] for r in replies[:3]] == ["pong"] * 3
            assert {r.get("error") for r in replies[3:]} == {"rate_limited"}
            # A client that keeps flooding is disconnected.
            with pytest.raises(WebSocketDisconnect) as closed:
                for _ in range(100):
                    ws.send_json({"type": "ping"})
                    ws.receive_json()
            assert closed.value.code == 1008


def test_http_answer_is_pushed_to_the_page(client: TestClient) -> None:
    session = new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        ws.receive_json()
        prompt = converse_until_prompt(client, ws)
        r = client.post(
            f"/api/hooks/{prompt['token']}", json={"payload": "Parley Cloud"}, headers=AUTH
        )
        assert r.json()["recorded"] is True
        frames = until(ws, lambda f: f["type"] == "status")
        assert [f["token"] for f in frames if f["type"] == "answered"] == [prompt["token"]]
    run = wait_run(client, prompt["run_id"], lambda run: run["status"] == "completed")
    assert run["result"]["reply"].startswith("Thanks! For Parley Cloud")


def test_a_page_may_pick_another_offered_agent(redis_url: str, monkeypatch: Any) -> None:
    pytest.importorskip("langchain_core")
    import examples.langchain_agent  # noqa: F401 - registers the second demo's workflow

    monkeypatch.setenv("PARLEY_DEMO_CHUNK_DELAY", "0")
    with make_client(redis_url, chat_workflows=frozenset({"langchain_agent"})) as client:
        session = new_session(client)
        with client.websocket_connect(f"/ws/sessions/{session}") as ws:
            ws.send_json({"type": "message", "text": "hi", "agent": "nope", "ref": "x"})
            error = until(ws, lambda f: f.get("ref") == "x")[-1]
            assert error["error"] == "unknown_agent" and "langchain_agent" in error["message"]
            ws.send_json(
                {"type": "message", "text": "where is my order 1234?", "agent": "langchain_agent"}
            )
            prompt = until(ws, lambda f: f["type"] == "prompt")[-1]
            run = client.get(f"/api/runs/{prompt['run_id']}", headers=AUTH).json()
            assert run["workflow"] == "langchain_agent"
            assert prompt["hook"] == "ask_visitor"


def test_a_client_id_with_a_trailing_newline_is_malformed(client: TestClient) -> None:
    """``^...$`` with ``match`` took "c1\n" (``$`` matches before a final newline): the id
    went into the session's messages and its idempotency key."""
    assert_refused_unshown(client, "c1\n", "malformed")

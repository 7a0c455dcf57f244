"""Memory across a session's runs: the demo agent's second reply uses what the visitor
said in the first exchange; a workflow that keeps no memory is started as before."""

from __future__ import annotations

from starlette.testclient import TestClient

from .conftest import AUTH, wait_run
from .test_ws import new_session, until


def test_the_agents_second_reply_uses_a_fact_from_the_first_exchange(client: TestClient) -> None:
    session = new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        ws.send_json({"type": "message", "text": "my worker crashed"})
        prompt = until(ws, lambda f: f["type"] == "prompt")[-1]
        ws.send_json({"type": "answer", "token": prompt["token"], "payload": "Parley Self-hosted"})
        first = until(ws, lambda f: f["type"] == "status")
        assert first[-1]["status"] == "completed"
        # The second exchange asks nothing: the agent knows the product already.
        ws.send_json({"type": "message", "text": "it is slow"})
        second = until(ws, lambda f: f["type"] == "status")
    assert second[-1]["status"] == "completed"
    assert not [f for f in second if f["type"] == "prompt"]
    reply = "".join(f["delta"] for f in second if f["type"] == "text")
    assert "Since you use **Parley Self-hosted**" in reply
    run = wait_run(client, second[-1]["run_id"], lambda r: r["status"] == "completed")
    memory = run["result"]["memory"]
    assert {"role": "user", "content": "Parley Self-hosted"} in memory
    assert memory[-1]["role"] == "assistant" and "Parley Self-hosted" in memory[-1]["content"]
    events = client.get(f"/api/runs/{run['run_id']}/events", headers=AUTH).json()["events"]
    started = events[0]["data"]
    assert started["kwargs"]["memory"][0] == {"role": "user", "content": "my worker crashed"}


def test_memory_is_bounded(client: TestClient) -> None:
    from examples.support_agent import MEMORY_CHARS, MEMORY_MESSAGES, remember

    long = [{"role": "user", "content": "x" * 5000}] * (MEMORY_MESSAGES + 7)
    kept = remember(long)
    assert len(kept) == MEMORY_MESSAGES
    assert all(len(m["content"]) == MEMORY_CHARS for m in kept)

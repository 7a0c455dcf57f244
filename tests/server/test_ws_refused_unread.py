"""A frame the gateway refuses unread (too large) still names the frame it refuses: its
``ref`` is read from the frame's head (the widget writes it first) and echoed, so the page
can settle what the frame carried. Without it the error had no ``ref``, and the widget's
answer or message waited for a reply for ever."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from server import ws as gateway

from .test_ws import new_session

TEXT = "x" * 70_000  # a frame over max_frame_bytes (64 KiB)


@pytest.mark.parametrize(
    ("head", "ref"),
    [
        ('{"ref":"r7","type":"answer"', "r7"),
        (' { "ref" : "m-1_A" , "type"', "m-1_A"),
        ('{"ref":12,"type":"message"', 12),
        ('{"ref":-3}', -3),
        ('{"type":"message","ref":"r8"', None),  # not at the head: not read
        ('{"ref":"a\\"b","type"', None),  # not a plain ref
        ('{"ref":1.5,"type"', None),
        ('["ref","r1"]', None),
        ("", None),
        (None, None),
    ],
)
def test_head_ref_reads_a_ref_the_frame_opens_with(head: str | None, ref: str | int | None) -> None:
    assert gateway.head_ref(head) == ref


def test_a_frame_too_large_is_refused_with_the_ref_it_opens_with(client: TestClient) -> None:
    session = new_session(client)
    with client.websocket_connect(f"/ws/sessions/{session}") as ws:
        assert ws.receive_json()["type"] == "ready"
        for frame, ref in [
            ('{"ref":"r7","type":"message","text":"' + TEXT + '"}', "r7"),
            ('{"ref":12,"type":"answer","token":"t","payload":"' + TEXT + '"}', 12),
        ]:
            ws.send_text(frame)
            reply = ws.receive_json()
            assert reply["type"] == "error" and reply["error"] == "frame_too_large", reply
            assert reply["ref"] == ref
        ws.send_text('{"type":"message","ref":"r8","text":"' + TEXT + '"}')
        reply = ws.receive_json()
        assert reply["error"] == "frame_too_large" and "ref" not in reply

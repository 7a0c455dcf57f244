"""Turning the Redis store's raw replies into events (runtime/store/redis/_decode.py)."""

from __future__ import annotations

from runtime.models import Event
from runtime.store.redis import _decode


def test_a_scripts_log_entries_become_events_with_the_bytes_of_their_data() -> None:
    entries = [
        [b"1-0", [b"t", b"workflow.started", b"d", b'{"args":[1]}']],
        [b"1-1", [b"t", b"hook.received", b"d", b'{"hook_id":"h","payload":"ok"}']],
    ]
    events, size = _decode.script_events(entries)
    assert events == [
        Event("1-0", "workflow.started", {"args": [1]}),
        Event("1-1", "hook.received", {"hook_id": "h", "payload": "ok"}),
    ]
    assert size == len(b'{"args":[1]}') + len(b'{"hook_id":"h","payload":"ok"}')
    assert _decode.events(entries) == events  # the general reader agrees


def test_an_entry_with_its_fields_in_another_order_is_read_by_name() -> None:
    entries = [[b"2-0", [b"d", b'{"x":true}', b"t", b"timer.fired", b"extra", b"1"]]]
    events, size = _decode.script_events(entries)
    assert events == [Event("2-0", "timer.fired", {"x": True})]
    assert size == len(b'{"x":true}')


def test_no_entries_no_events() -> None:
    assert _decode.script_events([]) == ([], 0)
    assert _decode.flat_hash([]) == {}
    assert _decode.flat_hash([b"a", b"1", b"b", b"2"]) == {"a": b"1", "b": b"2"}

"""A finished run's archive: its whole event log and its hooks hash as one compressed
string (``run:<id>:archive``), which replaces the stream and the hash once the run has
ended (``lua/compact.lua``). A bench run's three keys cost ~5 KB of Redis for the
retention (a stream's node alone is allocated at 4 KB); its archive ~0.3 KB.

The blob is a format byte, then zlib with a preset dictionary of the words every log
repeats (event types, field names), of JSON ``{"e": [[id, type, data], ...], "h": {field:
record}}`` where each event's data is embedded as the JSON the stream held (so it decodes
to the very same values) and the hooks hash is kept field by field (records and answer
digests, ._records). Lua has no zlib: the process that ended the run builds the blob from
the log and hooks it reads later, and the swap is fenced (the log's length, the hooks'
count). The format byte names the dictionary: a blob written with one is read
with that one forever, so the dictionary below never changes; a new one gets a new byte.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ...models import Event

_FORMAT_1 = b"\x01"
# Format 1's preset dictionary. Frozen: blobs in Redis were compressed with it.
_ZDICT_1 = (
    b'"hook_id":"step_id":"name":"args":[],"kwargs":{},"result":"payload":"wait":"seq":0,'
    b'"timer_id":"error":{"type":"message":"final":true,"attempt":1,"expires_at":"prompt":'
    b'"schema":"topic":"child_run_id":"status":"completed","reason":"retry_at":'
    b'"workflow.started","workflow.completed","workflow.failed","workflow.cancelled",'
    b'"workflow.retried","step.started","step.completed","step.failed","step.suspended",'
    b'"hook.created","hook.received","hook.expired","timer.fired","message.received",'
    b'"child.completed",'
    b'"h":{"e":[["'
)
_LEVEL = 6
# The compressor's window (8 KB) and hash memory (memLevel 4, 8 KB) are its own choice:
# any inflate reads any window up to 32 KB, so blobs of every setting read alike. zlib's
# defaults (32 KB, memLevel 8) clear a 64 KB hash table for every blob; a run's log is a
# few KB, and measured with callgrind a bench run's pack took 192k instructions with them
# and 135k with these, to the same 226 bytes (a 300-turn chat log: +2 % bytes).
_WINDOW_BITS = 13
_MEM_LEVEL = 4


def pack(entries: Sequence[Any], hooks: Mapping[bytes, bytes]) -> bytes:
    """The blob of a log (XRANGE's reply as Redis sends it: ``[id, [b"t", type, b"d",
    data]]`` each) and a hooks hash."""
    doc = {
        "e": [
            [entry_id.decode(), fields[1].decode(), orjson.Fragment(fields[3])]
            for entry_id, fields in entries
        ],
        "h": {field.decode(): record.decode() for field, record in hooks.items()},
    }
    packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WINDOW_BITS, _MEM_LEVEL, zdict=_ZDICT_1)
    return _FORMAT_1 + packer.compress(orjson.dumps(doc)) + packer.flush()


def _unpack(blob: bytes) -> dict[str, Any]:
    if blob[:1] != _FORMAT_1:
        raise ValueError(f"unknown run archive format {blob[:1]!r}")
    unpacker = zlib.decompressobj(zdict=_ZDICT_1)
    doc: dict[str, Any] = orjson.loads(unpacker.decompress(blob[1:]) + unpacker.flush())
    return doc


def events(blob: bytes) -> list[Event]:
    return [Event(entry_id, kind, data) for entry_id, kind, data in _unpack(blob)["e"]]


def hooks(blob: bytes) -> dict[bytes, bytes]:
    """The hooks hash as HGETALL outside a script returns it."""
    return {field.encode(): record.encode() for field, record in _unpack(blob)["h"].items()}


def unpack(blob: bytes) -> tuple[list[Event], dict[bytes, bytes]]:
    doc = _unpack(blob)
    return (
        [Event(entry_id, kind, data) for entry_id, kind, data in doc["e"]],
        {field.encode(): record.encode() for field, record in doc["h"].items()},
    )

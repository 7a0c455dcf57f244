"""Finished runs' archives: their whole event logs and hooks hashes, compressed, which
replace their streams and hashes once they have ended (``lua/compact.lua``). A bench run's
three keys cost ~5 KB of Redis for the retention (a stream's node alone is allocated at
4 KB); its share of an archive ~0.1 KB.

Each run's *document* is JSON ``{"e": [[id, type, data], ...], "h": {field: record}}``
where each event's data is embedded as the JSON the stream held (so it decodes to the very
same values) and the hooks hash is kept field by field (records and answer digests,
._records). Lua has no zlib: the process that ended the runs builds the blob from the logs
and hooks it reads later, and the swap is fenced (each log's length, each hooks' count).

Two formats, named by the blob's first byte; both are read forever, since the blobs in
Redis were written with them, and so both keep their preset dictionary unchanged:

- **Format 2, a segment** (``archive:<segment id>``, what compaction writes): the runs of
  one partition that ended together, up to :data:`SEGMENT_BYTES` of documents, in one
  zlib stream: a header line ``{run id: [start, end]}`` (the document's offsets after it),
  then the documents. Each run's hash names its segment (field ``archive``); the segment
  expires with the last of its runs. zlib's setup (its window, hash table and Huffman
  trees) costs a fixed ~130k instructions per stream whatever it holds, and the logs of
  runs of one workflow repeat each other: measured with callgrind on 100 bench logs, a
  blob per run cost 171k instructions and 252 bytes a run, a segment of all 100 50k and
  64 bytes a run (bench/README.md).
- **Format 1, a run's own blob** (``run:<id>:archive``, what compaction wrote before
  segments): one document.

Reading one run of a segment inflates the whole segment (at most ~64 KB, or the one run
that is bigger) and parses the header and that run's document only.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ...models import Event

_FORMAT_1 = b"\x01"
_FORMAT_2 = b"\x02"
# The preset dictionary of both formats. Frozen: blobs in Redis were compressed with it.
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
# A segment takes runs until their documents reach this size; a run whose document is
# bigger has a segment of its own. It bounds what reading one run inflates.
SEGMENT_BYTES = 64 * 1024
# Level 2 of zlib's defaults: on segments of bench logs as cheap as level 1 (per run ~16k
# instructions of deflate) and 6 % smaller; level 6 cost +28k a run for 25 % fewer bytes.
# (Any inflate reads any level and window.)
_LEVEL = 2


def document(entries: Sequence[Any], hooks: Mapping[bytes, bytes]) -> bytes:
    """A run's document, from its log (XRANGE's reply as Redis sends it: ``[id, [b"t",
    type, b"d", data]]`` each) and its hooks hash."""
    return orjson.dumps(
        {
            "e": [
                [entry_id.decode(), fields[1].decode(), orjson.Fragment(fields[3])]
                for entry_id, fields in entries
            ],
            "h": {field.decode(): record.decode() for field, record in hooks.items()},
        }
    )


def group(documents: Sequence[bytes]) -> list[range]:
    """The documents' positions split into segments, in order: each as many as fit in
    :data:`SEGMENT_BYTES` together, and at least one."""
    segments: list[range] = []
    start, size = 0, 0
    for i, doc in enumerate(documents):
        if i > start and size + len(doc) > SEGMENT_BYTES:
            segments.append(range(start, i))
            start, size = i, 0
        size += len(doc)
    if documents:
        segments.append(range(start, len(documents)))
    return segments


def segment(run_ids: Sequence[str], documents: Sequence[bytes]) -> bytes:
    """The format 2 blob of these runs' documents."""
    spans: dict[str, tuple[int, int]] = {}
    offset = 0
    for run_id, doc in zip(run_ids, documents, strict=True):
        spans[run_id] = (offset, offset + len(doc))
        offset += len(doc)
    packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, zdict=_ZDICT_1)
    head = packer.compress(orjson.dumps(spans) + b"\n")
    return _FORMAT_2 + head + packer.compress(b"".join(documents)) + packer.flush()


def _inflate(blob: bytes) -> bytes:
    unpacker = zlib.decompressobj(zdict=_ZDICT_1)
    return unpacker.decompress(blob[1:]) + unpacker.flush()


def _document(blob: bytes, run_id: str) -> dict[str, Any] | None:
    """Run ``run_id``'s document in ``blob`` (either format); None if a segment does not
    hold it."""
    kind = blob[:1]
    if kind == _FORMAT_1:
        doc: dict[str, Any] = orjson.loads(_inflate(blob))
        return doc
    if kind != _FORMAT_2:
        raise ValueError(f"unknown run archive format {kind!r}")
    data = _inflate(blob)
    end_of_header = data.index(b"\n")
    span = orjson.loads(data[:end_of_header]).get(run_id)
    if span is None:
        return None
    start = end_of_header + 1
    doc = orjson.loads(memoryview(data)[start + span[0] : start + span[1]])
    return doc


def unpack(blob: bytes, run_id: str) -> tuple[list[Event], dict[bytes, bytes]] | None:
    """Run ``run_id``'s log and its hooks hash (as HGETALL outside a script returns it)
    from its archive; None if it is a segment that does not hold the run."""
    doc = _document(blob, run_id)
    if doc is None:
        return None
    return (
        [Event(entry_id, kind, data) for entry_id, kind, data in doc["e"]],
        {field.encode(): record.encode() for field, record in doc["h"].items()},
    )

"""Tags (search attributes): ``key: value`` pairs on a run, given at start
(``Runtime.start(..., tags=...)``) or set by the workflow (``set_tags``), by which runs and
their pending hooks are listed through an index (not a scan of the store).

Keys and values are short, plain text, so that they can be part of a Redis key name, a URL
query (``tag=key:value``) and a command line (``--tag key=value``) unescaped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .errors import InvalidTag

__all__ = ["MAX_TAGS", "TAG_KEY_RE", "TAG_VALUE_RE", "check_tags", "merge_tags", "parse_tag"]

TAG_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
TAG_VALUE_RE = re.compile(r"[A-Za-z0-9_.:@/+-]{1,128}")
MAX_TAGS = 16


def _check_key(key: object, run_id: str | None) -> str:
    if not isinstance(key, str) or not TAG_KEY_RE.fullmatch(key):
        raise InvalidTag(
            f"a tag key must be a letter then up to 63 letters, digits, '_', '.' or '-' "
            f"({TAG_KEY_RE.pattern}), got {key!r:.80}",
            run_id=run_id,
        )
    return key


def _check_value(key: str, value: object, run_id: str | None) -> str:
    if not isinstance(value, str) or not TAG_VALUE_RE.fullmatch(value):
        raise InvalidTag(
            f"the value of tag {key!r} must be 1 to 128 letters, digits or '_.:@/+-' "
            f"({TAG_VALUE_RE.pattern}), got {value!r:.80}",
            run_id=run_id,
        )
    return value


def check_tags(
    tags: Mapping[str, str | None], *, run_id: str | None = None, removals: bool = False
) -> dict[str, str | None]:
    """``tags`` validated (a copy, sorted by key). With ``removals``, a value of None
    removes that tag (``set_tags``)."""
    if not isinstance(tags, Mapping):
        raise InvalidTag(
            f"tags must be a mapping of key to value, got {type(tags).__name__}", run_id=run_id
        )
    checked: dict[str, str | None] = {}
    for key in sorted(tags, key=str):
        value = tags[key]
        _check_key(key, run_id)
        checked[key] = None if value is None and removals else _check_value(key, value, run_id)
    if len(checked) > MAX_TAGS:
        raise InvalidTag(f"a run has at most {MAX_TAGS} tags, got {len(checked)}", run_id=run_id)
    return checked


def merge_tags(
    current: Mapping[str, str], changes: Mapping[str, str | None], *, run_id: str | None = None
) -> dict[str, str]:
    """``current`` with ``changes`` applied (None removes a key), at most ``MAX_TAGS``."""
    merged = dict(current)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    if len(merged) > MAX_TAGS:
        raise InvalidTag(
            f"a run has at most {MAX_TAGS} tags; these changes would give it {len(merged)}",
            run_id=run_id,
        )
    return dict(sorted(merged.items()))


def parse_tag(text: str, sep: str = ":") -> tuple[str, str]:
    """``"key<sep>value"`` (the API's ``key:value``, the CLI's ``key=value``) as a pair."""
    key, found, value = text.partition(sep)
    if not found:
        raise InvalidTag(f"expected a tag as key{sep}value, got {text!r:.80}")
    return _check_key(key, None), _check_value(key, value, None)

"""A run's keys (runtime/store/redis/_keys.py): the names the Lua scripts build too."""

from __future__ import annotations

import pytest

from runtime.store.redis import _keys

_PER_RUN = ("run", "events", "ckpt", "hooks")
_PER_PARTITION = ("tasks", "deadlines", "pending", "stats")


@pytest.mark.parametrize("partitions", [1, 16, 64])
def test_a_runs_keys_are_the_templates_keys_in_its_partition(partitions: int) -> None:
    run_id = "01JBENCH0000000000000000AB"
    keys = _keys.run_keys(run_id, partitions)
    assert keys.partition == _keys.partition_of(run_id, partitions)
    assert keys.prefix == _keys.partition_prefix(keys.partition)
    for name in _PER_RUN:
        assert getattr(keys, name) == _keys.key(name, keys.partition, run_id=run_id)
    for name in _PER_PARTITION:
        assert getattr(keys, name) == _keys.key(name, keys.partition)
    assert keys.declared == (keys.run,)  # a per-run script is given the hash's key alone


def test_every_key_of_a_run_shares_its_hash_tag() -> None:
    keys = _keys.run_keys("01JBENCH0000000000000000CD", 16)
    tag = f"{{p:{keys.partition}}}"
    for name in (*_PER_RUN, *_PER_PARTITION):
        assert tag in getattr(keys, name)

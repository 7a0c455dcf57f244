"""What a process holds of the logs of the runs it executes (runtime/store/redis/_held.py):
only what adds up to the run's own count of events, under the lease that gathered it, and
never more than its bounds."""

from __future__ import annotations

from typing import Any

from runtime.store.redis._held import ENTRY_OVERHEAD, HeldLogs


def _entries(*ids: str) -> list[Any]:
    return [[i.encode(), [b"t", b"step.started", b"d", b"{}"]] for i in ids]


def test_a_claim_of_the_whole_log_is_held_when_it_is_the_whole_log() -> None:
    held = HeldLogs()
    held.claimed("r", "1", _entries("1-0", "2-0"), tail=False, count=2)
    assert held.take("r", "1") == _entries("1-0", "2-0")
    held.claimed("r", "2", _entries("1-0"), tail=False, count=2)  # the run says 2
    assert held.take("r", "2") is None


def test_a_tail_extends_only_what_was_held() -> None:
    held = HeldLogs()
    held.claimed("r", "1", _entries("3-0"), tail=True, count=3)  # nothing held before it
    assert held.take("r", "1") is None
    held.claimed("r", "1", _entries("1-0", "2-0"), tail=False, count=2)
    held.claimed("r", "2", _entries("3-0"), tail=True, count=3)
    assert held.take("r", "2") == _entries("1-0", "2-0", "3-0")
    held.claimed("r", "1", _entries("1-0", "2-0"), tail=False, count=2)
    held.claimed("r", "2", _entries("4-0"), tail=True, count=4)  # an event in between
    assert held.take("r", "2") is None


def test_an_apply_adds_what_arrived_then_its_own_events() -> None:
    held = HeldLogs()
    held.claimed("r", "1", _entries("1-0"), tail=False, count=1)
    held.applied("r", "1", 1, "1-0", _entries("2-0"), _entries("3-0", "3-1"))
    assert held.take("r", "1") == _entries("1-0", "2-0", "3-0", "3-1")


def test_an_apply_that_does_not_add_up_drops_the_run() -> None:
    held = HeldLogs()
    held.claimed("r", "1", _entries("1-0", "2-0"), tail=False, count=2)
    held.applied("r", "1", 3, "2-0", [], _entries("4-0"))  # it knew 3 events, we hold 2
    assert held.take("r", "1") is None and held.bytes == 0
    held.claimed("r", "1", _entries("1-0", "2-0"), tail=False, count=2)
    held.applied("r", "1", 2, "1-0", [], _entries("4-0"))  # up to another event
    assert held.take("r", "1") is None


def test_another_lease_neither_adds_nor_takes() -> None:
    """A zombie execution's late reply (its lease, fence 1, was taken over by fence 2)
    leaves the log its successor holds as it is."""
    held = HeldLogs()
    held.claimed("r", "2", _entries("1-0"), tail=False, count=1)
    held.applied("r", "1", 1, "1-0", [], _entries("2-0"))
    held.drop("r", "1")
    assert held.take("r", "1") is None
    assert held.take("r", "2") == _entries("1-0")


def test_a_dropped_run_is_forgotten() -> None:
    held = HeldLogs()
    held.claimed("r", "1", _entries("1-0"), tail=False, count=1)
    held.drop("r", "1")
    assert held.take("r", "1") is None and len(held) == 0 and held.bytes == 0


def test_a_tail_under_a_new_lease_extends_what_the_last_one_left() -> None:
    """A run suspended under lease 1 and resumed here under lease 2 with a tail claim (the
    replay cache's hit): the log held from lease 1 goes on; lease 1's late replies and
    drops no longer touch it."""
    held = HeldLogs()
    held.claimed("r", "1", _entries("1-0"), tail=False, count=1)
    held.applied("r", "1", 1, "1-0", [], _entries("2-0"))
    held.claimed("r", "2", _entries("3-0"), tail=True, count=3)
    held.applied("r", "1", 2, "2-0", [], _entries("9-0"))
    held.drop("r", "1")
    held.applied("r", "2", 3, "3-0", [], _entries("4-0"))
    assert held.take("r", "2") == _entries("1-0", "2-0", "3-0", "4-0")


def _size(n: int) -> int:
    """What ``n`` entries of :func:`_entries` count for (data ``{}``: 2 bytes each)."""
    return n * (2 + ENTRY_OVERHEAD)


def test_bounded_by_runs_and_by_bytes_least_recent_first() -> None:
    held = HeldLogs(runs=2, max_bytes=_size(5))
    held.claimed("a", "1", _entries("1-0", "1-1"), tail=False, count=2)
    held.claimed("b", "1", _entries("1-0", "1-1"), tail=False, count=2)
    held.applied("a", "1", 2, "1-1", [], [])  # used: the most recent now
    held.claimed("c", "1", _entries("1-0"), tail=False, count=1)
    assert len(held) == 2 and held.take("b", "1") is None  # runs: b was the least recent
    held.claimed("d", "1", _entries("1-0", "1-1", "1-2"), tail=False, count=3)
    assert held.bytes <= _size(5) and held.take("a", "1") is None  # bytes: a went
    held.claimed("e", "1", _entries(*(f"{i}-0" for i in range(6))), tail=False, count=6)
    assert held.take("e", "1") is None  # over the bound alone: not held at all
    assert held.bytes == sum(_size(len(held.take(r, "1") or [])) for r in ("c", "d"))
    assert held.bytes == 0


def test_a_large_payload_counts_for_its_size() -> None:
    held = HeldLogs(max_bytes=50_000)  # 512 runs, but not one of ~99 KB
    big = [[b"1-0", [b"t", b"hook.received", b"d", b'"' + b"x" * 99_000 + b'"']]]
    held.claimed("big", "1", big, tail=False, count=1)
    held.claimed("small", "1", _entries("1-0"), tail=False, count=1)
    assert held.take("small", "1") is not None and held.take("big", "1") is None

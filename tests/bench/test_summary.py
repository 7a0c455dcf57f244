"""The main mode's verdicts on issue 14's item 1, from a run's own figures."""

from __future__ import annotations

import pytest

from bench.summary import item_1_rows

_ROWS = (
    "workers' CPU us / lifecycle (issue 14)",
    "total CPU us / lifecycle (issue 14)",
    "lifecycles/s with 2 workers (issue 14)",
)


def _verdicts(cpu: dict[str, int], rate: float, workers: int) -> dict[str, str]:
    return {row[0].strip(): row[3] for row in item_1_rows(cpu, 0, rate, workers)}


@pytest.mark.parametrize(
    ("second_worker_us", "rate", "verdict"),
    [
        (150, 2500, "met"),  # workers 300 us, total 800 us, 2,500/s: each at its bound
        (151, 2499, "MISSED"),  # one past each bound
    ],
)
def test_each_target_is_judged_at_its_bound(
    second_worker_us: int, rate: float, verdict: str
) -> None:
    cpu = {"driver": 100, "worker0": 150, "worker1": second_worker_us, "redis": 400}
    assert _verdicts(cpu, rate, 2) == dict.fromkeys(_ROWS, verdict)


def test_the_rate_is_judged_with_two_workers_only() -> None:
    verdicts = _verdicts({"driver": 50, "worker0": 200, "redis": 300}, 1000, 1)
    assert "lifecycles/s with 2 workers (issue 14)" not in verdicts
    assert verdicts["workers' CPU us / lifecycle (issue 14)"] == "met"

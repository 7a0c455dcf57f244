"""The main mode's verdicts on issue 14's item 1, from a run's own figures."""

from __future__ import annotations

from bench.summary import item_1_rows


def _verdicts(cpu: dict[str, int], rate: float, workers: int) -> dict[str, str]:
    return {row[0].strip(): row[3] for row in item_1_rows(cpu, 0, rate, workers)}


def test_targets_met_at_their_bounds() -> None:
    cpu = {"driver": 100, "worker0": 150, "worker1": 150, "redis": 400}  # 300 and 800
    assert _verdicts(cpu, 2500, 2) == {
        "workers' CPU us / lifecycle (issue 14)": "met",
        "total CPU us / lifecycle (issue 14)": "met",
        "lifecycles/s with 2 workers (issue 14)": "met",
    }


def test_each_target_missed_past_its_bound() -> None:
    cpu = {"driver": 100, "worker0": 150, "worker1": 151, "redis": 400}  # 301 and 801
    assert _verdicts(cpu, 2499, 2) == {
        "workers' CPU us / lifecycle (issue 14)": "MISSED",
        "total CPU us / lifecycle (issue 14)": "MISSED",
        "lifecycles/s with 2 workers (issue 14)": "MISSED",
    }


def test_the_rate_is_judged_with_two_workers_only() -> None:
    verdicts = _verdicts({"driver": 50, "worker0": 200, "redis": 300}, 1000, 1)
    assert "lifecycles/s with 2 workers (issue 14)" not in verdicts
    assert verdicts["workers' CPU us / lifecycle (issue 14)"] == "met"

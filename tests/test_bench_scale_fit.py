"""bench_scale's curves: a resumed size's times are shown but not fitted; its peak RSS and disk are."""
from __future__ import annotations

from benchmarks.bench_scale import curves, markdown


def _run(n: int, seconds: float, rss: float, resumed: bool) -> dict:
    stage = {"stage": "graph", "wall_s": seconds, "cpu_s": seconds, "peak_rss_mib": rss, "disk_mib": n / 100}
    return {"n": n, "resumed": resumed, "stages": [stage], "total": dict(stage, stage="total")}


def test_a_resumed_size_is_left_out_of_the_time_fit_only():
    runs = [_run(1_000, 10.0, 100.0, False), _run(10_000, 100.0, 200.0, False), _run(100_000, 5.0, 400.0, True)]
    table = curves(runs)
    wall = table["total"]["wall_s"]
    assert wall["values"] == [10.0, 100.0, 5.0] and wall["fitted"] == [10.0, 100.0, None]
    assert wall["fit"]["points"] == 2 and abs(wall["fit"]["exponent"] - 1.0) < 1e-9
    assert table["total"]["peak_rss_mib"]["fit"]["points"] == 3
    head = markdown([1_000, 10_000, 100_000], table, [False, False, True]).splitlines()[2]
    assert "100,000 (resumed)" in head and "10,000 |" in head

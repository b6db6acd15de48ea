"""The build's peak memory: each stage's, measured around the caller's stage hook."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sirerag.pipeline.resources import MemoryMeter, peak_rss_mib, rss_mib

LINUX = sys.platform.startswith("linux")


_METER_RUN = """
import json
import numpy as np
from sirerag.pipeline.resources import MemoryMeter
seen = []
meter = MemoryMeter()
hook = meter.hook(lambda stage, event, seconds: seen.append([stage, event]))
hook("small", "start", 0.0)
hook("small", "end", 0.1)
hook("large", "start", 0.0)
block = np.ones(64 * 1024 * 1024 // 8)  # 64 MiB, touched, live when the stage ends
hook("large", "end", 0.1)
del block
print(json.dumps({"seen": seen, "record": meter.record()}))
"""


def test_the_meter_records_each_stage_peak_and_calls_the_inner_hook() -> None:
    # in a fresh process: in the test worker, memory freed by earlier tests can lower RSS between the stages
    out = json.loads(subprocess.run([sys.executable, "-c", _METER_RUN], check=True, capture_output=True,
                                    text=True).stdout)
    assert out["seen"] == [["small", "start"], ["small", "end"], ["large", "start"], ["large", "end"]]
    record = out["record"]
    assert record["peak_rss_mib"] > 0
    if LINUX:
        stages = record["stage_peak_rss_mib"]
        assert list(stages) == ["small", "large"]
        assert stages["large"] >= stages["small"] + 32  # the block was live during "large" only
        assert record["peak_rss_mib"] >= stages["large"]  # the kernel's peak is left as it is


def test_a_stage_that_raises_stops_the_sampling_when_the_meter_closes() -> None:
    meter = MemoryMeter()
    meter.hook(None)("extraction", "start", 0.0)
    meter.close()  # what the build does when a stage raised (its end is never reported)
    before = dict(meter.stages or {})
    meter.sample()
    assert (meter.stages or {}) == before


def test_rss_and_peak_are_in_mib() -> None:
    for value in (peak_rss_mib(), rss_mib()):
        assert value is None or 10 < value < 1024 * 1024


@pytest.mark.skipif(not LINUX, reason="the resident size is read from /proc")
def test_without_proc_the_stages_are_left_out(monkeypatch, tmp_path) -> None:
    import sirerag.pipeline.resources as resources

    monkeypatch.setattr(resources, "_STATUS", tmp_path / "no-status")  # a status file that does not exist
    meter = MemoryMeter()
    hook = meter.hook(None)
    hook("load", "start", 0.0)
    hook("load", "end", 0.1)
    assert "stage_peak_rss_mib" not in meter.record() and meter.record()["peak_rss_mib"] > 0


@pytest.mark.skipif(not LINUX, reason="the resident size is read from /proc")
def test_a_stage_end_hands_back_the_pages_of_tracked_mapped_arrays(tmp_path) -> None:
    from sirerag.core.io.mapped import map_npy, npy_writer

    with npy_writer(tmp_path / "rows.npy", (32 * 1024, 1024)) as out:
        out[:] = 1.0
    del out
    rows = map_npy(tmp_path / "rows.npy")
    meter = MemoryMeter()
    meter.track(rows)
    hook = meter.hook(None)
    hook("graph", "start", 0.0)
    before = rss_mib()
    assert float(rows[:, 0].sum()) == 32 * 1024  # 128 MiB of pages read during the stage
    read = rss_mib()
    hook("graph", "end", 0.1)
    assert read - before > 64 and read - rss_mib() > 64

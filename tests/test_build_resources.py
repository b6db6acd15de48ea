"""The build's peak memory: each stage's, measured around the caller's stage hook."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from sirerag.pipeline.resources import MemoryMeter, peak_rss_mib


def test_the_meter_records_each_stage_peak_and_calls_the_inner_hook() -> None:
    seen: list[tuple[str, str]] = []
    meter = MemoryMeter()
    hook = meter.hook(lambda stage, event, seconds: seen.append((stage, event)))
    hook("small", "start", 0.0)
    hook("small", "end", 0.1)
    hook("large", "start", 0.0)
    block = np.ones(64 * 1024 * 1024 // 8)  # 64 MiB, touched
    hook("large", "end", 0.1)
    del block
    assert seen == [("small", "start"), ("small", "end"), ("large", "start"), ("large", "end")]
    record = meter.record()
    assert record["peak_rss_mib"] > 0 and record["workers_peak_rss_mib"] >= 0
    if sys.platform.startswith("linux"):
        stages = record["stage_peak_rss_mib"]
        assert list(stages) == ["small", "large"]
        assert stages["large"] >= stages["small"] + 32  # the 64 MiB block was live during "large" only
        assert record["peak_rss_mib"] >= stages["large"]


def test_peak_rss_is_in_mib() -> None:
    peak = peak_rss_mib()
    assert peak is None or 10 < peak < 1024 * 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the stages' peaks are read from /proc")
def test_a_stage_that_cannot_reset_the_peak_leaves_the_stages_out(monkeypatch) -> None:
    import sirerag.pipeline.resources as resources

    monkeypatch.setattr(resources, "_reset_high_water", lambda: False)
    meter = MemoryMeter()
    hook = meter.hook(None)
    hook("load", "start", 0.0)
    hook("load", "end", 0.1)
    assert "stage_peak_rss_mib" not in meter.record() and meter.record()["peak_rss_mib"] > 0

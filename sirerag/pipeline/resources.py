"""Peak memory of a build, overall and by stage, for the manifest's ``resources`` record.

The peak of each stage needs the kernel's high-water mark reset when the stage starts
(``/proc/self/clear_refs``, Linux), which resets ``resource.getrusage``'s peak too, so the build's peak is
the largest of the stages' and ``getrusage``'s; where the mark cannot be reset the stages' peaks are left out
and ``getrusage`` alone gives it. ``workers_peak_rss_mib`` is the largest finished child process (the
clustering workers).
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from sirerag.pipeline.plan import StageHook

logger = logging.getLogger(__name__)

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def peak_rss_mib(children: bool = False) -> float | None:
    """The peak resident memory of this process (or of its largest finished child) in MiB; None where
    ``resource`` is missing (Windows)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF).ru_maxrss
    return round(usage / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)  # bytes on macOS, else KiB


def _high_water_mib() -> float | None:
    """``VmHWM`` of /proc/self/status in MiB, None when unreadable."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _reset_high_water() -> bool:
    try:
        _CLEAR_REFS.write_text("5")  # 5: reset the peak resident set size (proc(5))
    except OSError:
        return False
    return True


def release_freed_memory() -> None:
    """Hand the heap that freed objects left behind back to the system (glibc's ``malloc_trim``), so the
    next stage's peak starts from what is live; nothing where the C library has no ``malloc_trim``."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # another C library (musl)
        logger.debug("no malloc_trim in this C library")


class MemoryMeter:
    """Records the peak RSS of every stage; :meth:`hook` wraps the caller's ``on_stage``. At the end of
    each stage the freed heap is handed back (:func:`release_freed_memory`)."""

    def __init__(self) -> None:
        self.stages: dict[str, float] | None = {}

    def hook(self, inner: StageHook | None) -> StageHook:
        def on_stage(stage: str, event: str, seconds: float) -> None:
            if event == "end":
                release_freed_memory()
            if self.stages is not None:
                peak = _high_water_mib() if event == "end" else None
                if event == "start" and not _reset_high_water() or event == "end" and peak is None:
                    self.stages = None  # this system does not tell a stage's peak
                elif peak is not None:
                    self.stages[stage] = peak
            if inner is not None:
                inner(stage, event, seconds)

        return on_stage

    def record(self) -> dict[str, Any]:
        """The manifest's ``resources``: overall peaks and (where measured) the stages'."""
        # resetting the high-water mark resets getrusage's peak too: the overall peak is the largest seen
        peaks = [p for p in (peak_rss_mib(), *(self.stages or {}).values()) if p is not None]
        out: dict[str, Any] = {"peak_rss_mib": max(peaks) if peaks else None,
                               "workers_peak_rss_mib": peak_rss_mib(children=True)}
        if self.stages:
            out["stage_peak_rss_mib"] = dict(self.stages)
        return {k: v for k, v in out.items() if v is not None}

"""Peak memory of a build, overall and by stage, for the manifest's ``resources`` record.

The build's peak is ``resource.getrusage``'s for this process, or the largest stage's peak where that is
higher. (The clustering workers are not counted: ``getrusage`` of the children reports at least the parent's
size when they were forked, so it would not tell theirs.) A stage's peak is the largest resident
size seen while it ran: read from
``/proc/self/status`` at its start and end and every :data:`INTERVAL` seconds by a sampling thread (the
kernel's own high-water mark is left alone, so ``/usr/bin/time`` still reports the whole run's peak). A
spike shorter than the interval can be missed; where ``/proc`` is missing (not Linux) the stages' peaks
are left out.
"""
from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from sirerag.core.io.mapped import drop_pages
from sirerag.core.memory import release_free_memory
from sirerag.pipeline.plan import StageHook

logger = logging.getLogger(__name__)

_STATUS = Path("/proc/self/status")
#: Seconds between two readings of the resident size while a stage runs.
INTERVAL = 0.05


def peak_rss_mib() -> float | None:
    """The peak resident memory of this process in MiB; None where ``resource`` is missing (Windows)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(usage / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)  # bytes on macOS, else KiB


def rss_mib() -> float | None:
    """The resident size of this process now (``VmRSS``) in MiB; None when ``/proc`` does not tell it."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


class MemoryMeter:
    """Records the peak resident size of every stage; :meth:`hook` wraps the caller's ``on_stage``. At the end
    of each stage the freed heap is handed back (:func:`~sirerag.core.memory.release_free_memory`)."""

    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.stages: dict[str, float] | None = {} if rss_mib() is not None else None
        self._lock = threading.Lock()
        self._current: str | None = None
        self._stop = threading.Event()
        self._mapped: list[np.ndarray] = []

    def track(self, array: np.ndarray | None) -> None:
        """Count a memory-mapped array (:func:`~sirerag.core.io.mapped.map_npy`) among what a stage's end hands
        back: the pages of it that the stage read leave the resident size (the next read gets them from the file).
        None (nothing mapped) is ignored."""
        if array is not None:
            self._mapped.append(array)

    def sample(self) -> None:
        """Read the resident size now and count it for the running stage."""
        now = rss_mib()
        with self._lock:
            if self.stages is not None and self._current is not None and now is not None:
                self.stages[self._current] = max(self.stages.get(self._current, 0.0), now)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def hook(self, inner: StageHook | None) -> StageHook:
        def on_stage(stage: str, event: str, seconds: float) -> None:
            if self.stages is not None and event == "start":
                with self._lock:
                    self._current = stage
                self.sample()
                self._stop = threading.Event()
                threading.Thread(target=self._run, name=f"memory of {stage}", daemon=True).start()
            elif self.stages is not None and event == "end":
                self._stop.set()
                self.sample()
                with self._lock:
                    self._current = None
            if event == "end":
                for array in self._mapped:
                    drop_pages(array)
                release_free_memory()
            if inner is not None:
                inner(stage, event, seconds)

        return on_stage

    def close(self) -> None:
        """Stop sampling (a stage that raised never reports its end)."""
        self._stop.set()
        with self._lock:
            self._current = None

    def record(self) -> dict[str, Any]:
        """The manifest's ``resources``: overall peaks and (where measured) the stages'."""
        # the kernel updates its high-water mark lazily (memory handed back by madvise, as malloc_trim does, can
        # leave it behind a sampled peak): the build's peak is the larger of the two
        peaks = [p for p in (peak_rss_mib(), *(self.stages or {}).values()) if p is not None]
        out: dict[str, Any] = {"peak_rss_mib": max(peaks) if peaks else None}
        if self.stages:
            out["stage_peak_rss_mib"] = dict(self.stages)
        return {k: v for k, v in out.items() if v is not None}

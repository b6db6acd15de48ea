"""Free heap memory is returned to the system during a build (sirerag.core.memory)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from sirerag.core import memory

glibc = pytest.mark.skipif(memory._malloc_trim() is None, reason="needs glibc's malloc_trim")


def _rss_mib() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@glibc
def test_release_returns_the_free_heap_to_the_system() -> None:
    blocks = [np.ones(12_500) for _ in range(2_000)]  # 100 KB each: below malloc's mmap threshold, on the heap
    keep = blocks[-1]  # the heap's top stays in use, so free() alone cannot shrink the heap
    del blocks
    held = _rss_mib()
    assert memory.release_free_memory() is True
    assert held - _rss_mib() > 100, "about 200 MB freed into the heap should leave the process"
    assert keep.sum() == 12_500


def test_release_is_a_no_op_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)
    assert memory.release_free_memory() is False

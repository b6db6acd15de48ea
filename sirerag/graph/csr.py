"""Row positions in CSR-style arrays (an ``indptr`` slicing a flat array into rows), without a Python loop."""
from __future__ import annotations

import numpy as np


def row_positions(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. stops[i] - 1`` of every row ``i``, one row after the other:
    ``concatenate([arange(a, b) for a, b in zip(starts, stops)])`` (a row with ``stop <= start`` gives none)."""
    starts = np.asarray(starts, dtype=np.int64)
    counts = np.maximum(np.asarray(stops, dtype=np.int64) - starts, 0)
    return np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()), dtype=np.int64)

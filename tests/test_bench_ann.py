"""bench_ann's recall: by id, and by score, where rows tied with the exact k-th (duplicate texts) count."""
from __future__ import annotations

import numpy as np

from benchmarks.bench_ann import recall


def test_a_duplicate_of_an_exact_row_counts_by_score_not_by_id():
    vectors = np.array([[1.0, 0.0], [0.8, 0.6], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    query = np.array([1.0, 0.0], dtype=np.float32)
    truth = np.array([0, 1])  # exact search took row 1 of the tied rows 1 and 2
    assert recall(np.array([0, 2]), truth, vectors, query) == (0.5, 1.0)
    assert recall(np.array([0, 1]), truth, vectors, query) == (1.0, 1.0)
    assert recall(np.array([0, 3]), truth, vectors, query) == (0.5, 0.5)  # a lower row counts neither way

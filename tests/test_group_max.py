"""``GroupMax``: each group's largest value, as ``np.maximum.at`` gives it (the PPR retriever's passage scores)."""
from __future__ import annotations

import numpy as np

from sirerag.graph.entries import GroupMax


def test_group_max_matches_maximum_at() -> None:
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 40, size=300)
    groups[groups == 7] = 8  # group 7 has no value
    values = rng.normal(size=300).astype(np.float32)
    top = GroupMax(groups, 45)
    for fill in (-np.inf, 0.0):
        expected = np.full(45, fill)
        np.maximum.at(expected, groups, values)
        got = top(values, fill)
        np.testing.assert_array_equal(got, expected)
        assert got[7] == fill and got[44] == fill


def test_group_max_without_values() -> None:
    top = GroupMax(np.zeros(0, dtype=np.int64), 3)
    np.testing.assert_array_equal(top(np.zeros(0), -np.inf), np.full(3, -np.inf))

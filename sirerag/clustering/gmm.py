"""Gaussian mixtures with the component count chosen by BIC, and soft membership.

RAPTOR fits one mixture (scikit-learn defaults: full covariances, k-means
initialisation, one initialisation) for every k in ``1..max_clusters`` and keeps
the k with the lowest BIC. That exhaustive scan is where RAPTOR spends its time;
the ``fast`` search here fits the same mixtures (same seed, same settings, so a
given k always gets the identical model and BIC) but visits far fewer k:

1. a coarse ascending grid of k (1, 2, 3, 4, 6, 8, 11, 15, 20, 27, 36, 48, ...),
   stopped once ``PATIENCE`` successive grid points all fail to improve on the
   best BIC so far;
2. every k between the grid neighbours of the best grid point.

BIC(k) of these mixtures is close to unimodal, so the two usually choose the same
k; ``scripts/bench_similarity_tree.py --exhaustive`` measures how often.
"""
from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

logger = logging.getLogger(__name__)

SEARCHES = ("fast", "exhaustive")
#: Grid points past the best one that must all be worse before the coarse scan stops.
PATIENCE = 2


@dataclass
class ClusterStats:
    """Counters filled in by :func:`sirerag.clustering.cluster` (for logs and benchmarks).

    ``searches`` holds one ``(n_points, k_max, k_chosen)`` triple per BIC search;
    with ``keep_reduced=True`` the reduced matrix each search ran on is kept in
    ``reduced`` and the BIC of every k it evaluated in ``bics`` (same order), so a
    benchmark can rerun the search another way on the same data.
    """

    keep_reduced: bool = False
    umap_fits: int = 0
    gmm_fits: int = 0
    seconds_umap: float = 0.0
    seconds_gmm: float = 0.0
    reclustered: int = 0
    forced_splits: int = 0
    searches: list[tuple[int, int, int]] = field(default_factory=list)
    reduced: list[np.ndarray] = field(default_factory=list, repr=False)
    bics: list[dict[int, float]] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict:
        """The counters as plain JSON values (without the kept matrices)."""
        return {
            "umap_fits": self.umap_fits,
            "gmm_fits": self.gmm_fits,
            "seconds_umap": round(self.seconds_umap, 3),
            "seconds_gmm": round(self.seconds_gmm, 3),
            "reclustered": self.reclustered,
            "forced_splits": self.forced_splits,
            "bic_searches": len(self.searches),
        }


def coarse_grid(k_max: int) -> list[int]:
    """Ascending k values, about 30 % apart, always starting at 1 and ending at ``k_max``."""
    grid = [1]
    while grid[-1] < k_max:
        grid.append(min(k_max, max(grid[-1] + 1, int(round(grid[-1] * 1.33)))))
    return grid


def search_k(bic: Callable[[int], float], k_max: int, search: str = "fast") -> int:
    """The k in ``1..k_max`` with the lowest ``bic(k)`` (ties: the smaller k).

    Args:
        bic: BIC of the mixture with k components; called at most once per k.
        k_max: the largest k to consider (>= 1).
        search: ``exhaustive`` evaluates every k; ``fast`` a coarse grid then the
            bracket around its best point (see the module docstring).
    """
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    cache: dict[int, float] = {}

    def value(k: int) -> float:
        if k not in cache:
            cache[k] = float(bic(k))
        return cache[k]

    if search == "exhaustive":
        candidates = range(1, k_max + 1)
    else:
        grid = coarse_grid(k_max)
        best_i, worse = 0, 0
        for i, k in enumerate(grid):
            if value(k) < value(grid[best_i]):
                best_i, worse = i, 0
            elif i > best_i:
                worse += 1
                if worse >= PATIENCE:
                    break
        lo = grid[best_i - 1] if best_i > 0 else 1
        hi = grid[best_i + 1] if best_i + 1 < len(grid) else k_max
        candidates = range(lo, hi + 1)
    return min(candidates, key=lambda k: (value(k), k))


def fit_mixture(points: np.ndarray, k: int, random_state: int):  # noqa: ANN201 - GaussianMixture
    """One Gaussian mixture with RAPTOR's settings (scikit-learn defaults)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    model = GaussianMixture(n_components=k, covariance_type="full", n_init=1, random_state=random_state)
    with warnings.catch_warnings():
        # a mixture that stops at max_iter is still a valid candidate, as in RAPTOR
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(points)


def best_mixture(points: np.ndarray, max_clusters: int, random_state: int, *, search: str,
                 stats: ClusterStats):  # noqa: ANN201 - GaussianMixture
    """Fit mixtures for the k the search visits and return the one with the lowest BIC."""
    n_distinct = len(np.unique(points, axis=0))
    k_max = max(1, min(max_clusters, len(points) - 1, n_distinct))
    models: dict[int, object] = {}
    values: dict[int, float] = {}

    def bic(k: int) -> float:
        start = time.perf_counter()
        models[k] = model = fit_mixture(points, k, random_state)
        values[k] = float(model.bic(points))
        stats.gmm_fits += 1
        stats.seconds_gmm += time.perf_counter() - start
        return values[k]

    k = search_k(bic, k_max, search)
    stats.searches.append((len(points), k_max, k))
    if stats.keep_reduced:
        stats.reduced.append(points)
        stats.bics.append(values)
    return models[k]


def soft_memberships(probabilities: np.ndarray, threshold: float) -> list[np.ndarray]:
    """Rows (sorted) of each component whose probability exceeds ``threshold``.

    A row above the threshold nowhere joins its most probable component, so every
    row belongs to at least one cluster (RAPTOR leaves such rows out of the tree).
    Components without members are dropped; the rest keep their order.
    """
    member = probabilities > threshold
    orphans = ~member.any(axis=1)
    if orphans.any():
        member[np.flatnonzero(orphans), probabilities[orphans].argmax(axis=1)] = True
    return [np.flatnonzero(column) for column in member.T if column.any()]

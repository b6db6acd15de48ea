"""Gaussian mixtures with the component count chosen by BIC, and soft membership.

RAPTOR fits one mixture (scikit-learn defaults: full covariances, k-means
initialisation, one initialisation) for every k in ``1..max_clusters`` and keeps
the k with the lowest BIC. That exhaustive scan is where RAPTOR spends its time.
Two things make it cheaper here without changing which models are compared:

- BLAS and OpenMP are limited to one thread while mixtures are fitted: the
  matrices are tiny (``n x 10``), and thread start-up and spinning cost far more
  than the arithmetic, above all on a busy machine (a 30-component fit on 6.8k
  points: 0.6 CPU-seconds on one thread, 22 with the default thread pools).
- The ``fast`` search fits the same mixtures (same settings and seed, so a given
  k always gets the identical model and BIC) but visits fewer k: first a grid of
  k about 15 % apart (1, 2, ..., 10, 12, 14, 16, 18, 21, 24, 28, 32, 37, 43, 50),
  then every k between the grid neighbours of the best ``BRACKETS`` local minima
  of the grid. BIC(k) is noisy and, for the local clusters, often has two dips (a
  shallow one at small k and a deeper one where components collapse onto a few
  points each), which is why the whole grid is scanned rather than stopping at
  the first minimum. ``benchmarks/bench_similarity_tree.py --exhaustive`` measures
  how often the fast and the exhaustive search choose the same k.
"""
from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from sirerag.clustering.processes import active_pool

logger = logging.getLogger(__name__)

SEARCHES = ("fast", "exhaustive")
#: Ratio between successive k of the fast search's grid.
GRID_RATIO = 1.15
#: Local minima of the grid whose neighbourhoods are searched exhaustively.
BRACKETS = 2


#: the counters of :class:`ClusterStats` that add up over processes and calls
COUNTERS = ("umap_fits", "gmm_fits", "seconds_umap", "seconds_gmm", "cpu_seconds_umap", "cpu_seconds_gmm",
            "reclustered", "forced_splits", "sampled_steps")


@dataclass
class ClusterStats:
    """Counters filled in by :func:`sirerag.clustering.cluster` (for logs and benchmarks).

    ``seconds_*`` are wall-clock, ``cpu_seconds_*`` process CPU time (all threads), each summed over the
    processes that clustered (:mod:`sirerag.clustering.processes`).

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
    cpu_seconds_umap: float = 0.0
    cpu_seconds_gmm: float = 0.0
    reclustered: int = 0
    forced_splits: int = 0
    sampled_steps: int = 0
    searches: list[tuple[int, int, int]] = field(default_factory=list)
    reduced: list[np.ndarray] = field(default_factory=list, repr=False)
    bics: list[dict[int, float]] = field(default_factory=list, repr=False)

    def merge(self, other: "ClusterStats") -> None:
        """Add the counters of ``other`` (a worker process's) to these; seconds add up over processes."""
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.searches.extend(other.searches)
        self.reduced.extend(other.reduced)
        self.bics.extend(other.bics)

    def as_dict(self) -> dict:
        """The counters as plain JSON values (without the kept matrices)."""
        return {
            "umap_fits": self.umap_fits,
            "gmm_fits": self.gmm_fits,
            "seconds_umap": round(self.seconds_umap, 3),
            "seconds_gmm": round(self.seconds_gmm, 3),
            "cpu_seconds_umap": round(self.cpu_seconds_umap, 3),
            "cpu_seconds_gmm": round(self.cpu_seconds_gmm, 3),
            "reclustered": self.reclustered,
            "forced_splits": self.forced_splits,
            "sampled_steps": self.sampled_steps,
            "bic_searches": len(self.searches),
        }


def coarse_grid(k_max: int) -> list[int]:
    """Ascending k from 1 to ``k_max``, about ``GRID_RATIO`` apart (consecutive at small k)."""
    grid = [1]
    while grid[-1] < k_max:
        grid.append(min(k_max, max(grid[-1] + 1, int(round(grid[-1] * GRID_RATIO)))))
    if len(grid) > 2 and grid[-1] - grid[-2] < grid[-2] - grid[-3]:
        grid.pop(-2)  # no short last step: end at k_max
    return grid


def search_k(bic: Callable[[int], float], k_max: int, search: str = "fast",
             prefetch: Callable[[list[int]], None] | None = None) -> int:
    """The k in ``1..k_max`` with the lowest ``bic(k)`` among those visited (ties: the smaller k).

    Args:
        bic: BIC of the mixture with k components; called at most once per k.
        k_max: the largest k to consider (>= 1).
        search: ``exhaustive`` evaluates every k; ``fast`` the grid of
            :func:`coarse_grid`, then every k around its best local minima.
        prefetch: if given, called with the k of each phase (the whole range, the grid, the
            brackets) before ``bic`` is asked for them, so they can be computed together.
    """
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    cache: dict[int, float] = {}

    def value(k: int) -> float:
        if k not in cache:
            cache[k] = float(bic(k))
        return cache[k]

    def phase(ks: list[int]) -> list[float]:
        if prefetch is not None:
            prefetch([k for k in ks if k not in cache])
        return [value(k) for k in ks]

    if search == "exhaustive":
        phase(list(range(1, k_max + 1)))
    else:
        grid = coarse_grid(k_max)
        scores = phase(grid)
        last = len(grid) - 1
        minima = [i for i in range(len(grid))
                  if (i == 0 or scores[i] <= scores[i - 1]) and (i == last or scores[i] <= scores[i + 1])]
        brackets = [k for i in sorted(minima, key=lambda i: (scores[i], i))[:BRACKETS]
                    for k in range(grid[max(i - 1, 0)], grid[min(i + 1, last)] + 1)]
        phase(list(dict.fromkeys(brackets)))
    return min(cache, key=lambda k: (cache[k], k))


def fit_mixture(points: np.ndarray, k: int, random_state: int):  # noqa: ANN201 - GaussianMixture
    """One Gaussian mixture with RAPTOR's settings (scikit-learn defaults).

    float32 points whose covariance is numerically singular (for example a few
    duplicated points far apart: a rank-deficient covariance whose rounding error in
    float32 exceeds the 1e-6 regularisation) are refitted in float64; a single
    component that still fails gets a larger regularisation, since one cluster is
    always a valid answer. Other failures raise ``ValueError``.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    wide = points.astype(np.float64, copy=False)
    attempts = [(points, 1e-6)] + ([(wide, 1e-6)] if wide is not points else []) + ([(wide, 1e-3)] if k == 1 else [])
    for i, (data, reg_covar) in enumerate(attempts):
        model = GaussianMixture(n_components=k, covariance_type="full", n_init=1, random_state=random_state,
                                reg_covar=reg_covar)
        with warnings.catch_warnings():
            # a mixture that stops at max_iter is still a valid candidate, as in RAPTOR
            warnings.simplefilter("ignore", ConvergenceWarning)
            try:
                return model.fit(data)
            except ValueError:
                if i == len(attempts) - 1:
                    raise
    raise AssertionError("unreachable")  # pragma: no cover


def soft_cluster(points: np.ndarray, *, max_clusters: int, threshold: float, random_state: int, search: str,
                 stats: ClusterStats) -> list[np.ndarray]:
    """Fit the best mixture by BIC and return its soft clusters (see :func:`soft_memberships`)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        model = best_mixture(points, max_clusters, random_state, search=search, stats=stats)
        probabilities = model.predict_proba(points)
    return soft_memberships(probabilities, threshold)


def best_mixture(points: np.ndarray, max_clusters: int, random_state: int, *, search: str,
                 stats: ClusterStats):  # noqa: ANN201 - GaussianMixture
    """Fit mixtures for the k the search visits and return the one with the lowest BIC.

    k ranges up to ``min(max_clusters, n - 1, distinct points)``. A k whose fit fails
    (scikit-learn refuses a collapsed component) counts as infinitely bad. Inside a
    :func:`~sirerag.clustering.processes.clustering_processes` block, the fits of a large input's
    search phase run in the worker processes (each fit is the same wherever it runs).
    """
    n_distinct = len(np.unique(points, axis=0))
    k_max = max(1, min(max_clusters, len(points) - 1, n_distinct))
    models: dict[int, object] = {}
    values: dict[int, float] = {}

    def record(k: int, fitted: tuple[float, object | None, float, float]) -> float:
        value, model, seconds, cpu = fitted
        values[k] = value
        best = min(models, key=lambda j: (values[j], j)) if models else None
        if model is not None and (best is None or (value, k) < (values[best], best)):
            models.clear()  # keep only the best model so far
            models[k] = model
        stats.gmm_fits += 1
        stats.seconds_gmm += seconds
        stats.cpu_seconds_gmm += cpu
        return value

    def bic(k: int) -> float:
        return values[k] if k in values else record(k, fit_and_score(points, k, random_state))

    pool = None if stats.keep_reduced else active_pool(len(points))

    def prefetch(ks: list[int]) -> None:
        assert pool is not None  # search_k is given prefetch only with a pool
        pending = {k: pool.submit(fit_and_score, points, k, random_state) for k in sorted(ks, reverse=True)}
        for k in sorted(ks):  # recorded in the order the search would have fitted them
            future = pending[k]
            if future is not None:
                record(k, future.result())

    k = search_k(bic, k_max, search, prefetch=prefetch if pool is not None else None)
    stats.searches.append((len(points), k_max, k))
    if stats.keep_reduced:
        stats.reduced.append(points)
        stats.bics.append(values)
    return models[k]


def fit_and_score(points: np.ndarray, k: int, random_state: int) -> tuple[float, object | None, float, float]:
    """``(BIC, mixture, wall seconds, CPU seconds)`` of the k-component mixture of ``points`` (in this process,
    under :func:`soft_cluster`'s one-thread limit, or in a worker, which keeps that limit for its life);
    ``(inf, None, ...)`` when a component collapses (ill-defined covariance), except for k = 1, which raises."""
    start, cpu = time.perf_counter(), time.process_time()
    try:
        model = fit_mixture(points, k, random_state)
        value = float(model.bic(points))
    except ValueError as exc:  # a component collapsed (ill-defined covariance)
        if k == 1:
            raise
        logger.debug("mixture with %d components failed on %d points: %s", k, len(points), exc)
        model, value = None, math.inf
    return value, model, time.perf_counter() - start, time.process_time() - cpu


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

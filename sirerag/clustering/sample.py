"""Sample-and-assign: one clustering step on a sample, every row assigned to its clusters.

A step over ``n`` rows (UMAP, then the Gaussian mixture chosen by BIC) costs more than linear time and
memory in ``n``: UMAP's neighbour graph has ``n * sqrt(n)`` edges at the global step, and the BIC
search refits every row for every k it visits. Above ``clustering.sample_above`` rows a step instead

1. draws a seeded sample of ``clustering.sample_size`` rows (:func:`sample_rows`),
2. fits UMAP and the BIC-chosen mixture on the sample alone (:func:`fit_sample`), and
3. assigns every row to the components whose probability exceeds ``clustering.threshold``: the
   sample's rows by their fitted embedding, the others by UMAP ``transform`` and ``predict_proba``,
   in blocks of :data:`ASSIGN_BLOCK` rows (:func:`assign_block`).

The fit's memory and time depend on the sample only; the assignment is linear in the rows and each
block is independent of the others (the blocks are fixed by position, so the same input and seed give
the same clusters however the blocks are run). Inside a :func:`clustering_engine` block with a distributed
engine (Ray), the blocks run on the engine's workers: the fit travels with the worker factory, rows and
probabilities as JSON numbers (exact for float32 rows and float64 probabilities), so the clusters are
the same as here.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from sirerag.clustering.gmm import ClusterStats, best_mixture, soft_memberships
from sirerag.core.config import ClusteringConfig
from sirerag.engine import Engine, runs_here

logger = logging.getLogger(__name__)

#: Rows per assignment block. Fixed: UMAP ``transform`` optimises a block's points together, so a row's
#: coordinates depend on the rows it is assigned with.
ASSIGN_BLOCK = 4096
#: Blocks handed to a distributed engine at once, per worker: bounds the driver's memory for the rows'
#: JSON form whatever the level's size.
BLOCKS_PER_WORKER = 2

_ENGINE: contextvars.ContextVar[Engine | None] = contextvars.ContextVar("sirerag_clustering_engine", default=None)


@dataclass(frozen=True)
class SampleFit:
    """UMAP and the mixture fitted on a sample: what every assignment block needs."""

    reducer: Any
    mixture: Any
    sample_probabilities: np.ndarray


def sample_rows(n: int, size: int, random_state: int) -> np.ndarray:
    """``min(size, n)`` distinct row positions out of ``n``, sorted, drawn with ``random_state``."""
    if size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(random_state).choice(n, size=size, replace=False))


def fit_sample(points: np.ndarray, *, n_neighbors: int, dim: int, max_clusters: int, random_state: int,
               search: str, stats: ClusterStats) -> SampleFit:
    """Fit UMAP (cosine, keeping what ``transform`` needs) and the BIC-chosen mixture on ``points`` (the
    sample's vectors)."""
    from threadpoolctl import threadpool_limits
    from umap import UMAP

    start, cpu = time.perf_counter(), time.process_time()
    reducer = UMAP(n_neighbors=max(2, min(n_neighbors, len(points) - 1)), n_components=dim, metric="cosine",
                   random_state=random_state, transform_seed=random_state, n_jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # tiny samples fall back from spectral initialisation
        reduced = np.asarray(reducer.fit_transform(points))
    stats.umap_fits += 1
    stats.seconds_umap += time.perf_counter() - start
    stats.cpu_seconds_umap += time.process_time() - cpu
    with threadpool_limits(limits=1):
        mixture = best_mixture(reduced, max_clusters, random_state, search=search, stats=stats)
        probabilities = mixture.predict_proba(reduced)
    return SampleFit(reducer=reducer, mixture=mixture, sample_probabilities=probabilities)


def assign_block(fit: SampleFit, block: np.ndarray) -> np.ndarray:
    """Component probabilities ``(len(block), k)`` of rows not in the sample: UMAP ``transform``, then the
    mixture's ``predict_proba``. Depends only on ``fit`` and ``block``."""
    from threadpoolctl import threadpool_limits

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        reduced = np.asarray(fit.reducer.transform(np.asarray(block, dtype=np.float32)))
    with threadpool_limits(limits=1):
        return fit.mixture.predict_proba(reduced)


def sample_and_assign(points: np.ndarray, *, global_step: bool, config: ClusteringConfig, random_state: int,
                      stats: ClusterStats, local_neighbors: int) -> list[np.ndarray]:
    """One clustering step of ``points`` by sample-and-assign; returns the clusters as sorted positions
    (see :func:`~sirerag.clustering.gmm.soft_memberships`).

    Args:
        points: the step's rows.
        global_step: UMAP's ``n_neighbors`` is ``sqrt(sample - 1)`` (RAPTOR's global step), else
            ``local_neighbors``.
        config: a :class:`~sirerag.core.config.ClusteringConfig`.
        random_state: seed of the sample, UMAP (fit and transform) and the mixtures.
        stats: counters to add to.
    """
    sample = sample_rows(len(points), config.sample_size, random_state)
    n_neighbors = int(math.sqrt(len(sample) - 1)) if global_step else local_neighbors
    fit = fit_sample(points[sample], n_neighbors=n_neighbors, dim=config.reduction_dim,
                     max_clusters=config.max_clusters, random_state=random_state, search=config.bic_search,
                     stats=stats)
    probabilities = np.empty((len(points), fit.sample_probabilities.shape[1]), dtype=np.float64)
    probabilities[sample] = fit.sample_probabilities
    rest = np.setdiff1d(np.arange(len(points)), sample, assume_unique=True)
    start, cpu = time.perf_counter(), time.process_time()
    blocks = [rest[first:first + ASSIGN_BLOCK] for first in range(0, len(rest), ASSIGN_BLOCK)]
    engine = _ENGINE.get()
    if engine is None:
        for rows in blocks:
            probabilities[rows] = assign_block(fit, points[rows])
    else:
        _assign_on(engine, fit, points, blocks, probabilities)
    stats.seconds_umap += time.perf_counter() - start
    stats.cpu_seconds_umap += time.process_time() - cpu
    stats.sampled_steps += 1
    return soft_memberships(probabilities, config.threshold)


@contextlib.contextmanager
def clustering_engine(engine: Engine | None) -> Iterator[Engine | None]:
    """Within the block, :func:`sample_and_assign` runs its assignment blocks on ``engine`` when that is a
    distributed engine (for one running here, or None, they stay in this process). Yields the engine used
    for them, or None."""
    chosen = None if runs_here(engine) else engine
    token = _ENGINE.set(chosen)
    try:
        yield chosen
    finally:
        _ENGINE.reset(token)


class _AssignFactory:
    """Builds the worker of the assignment blocks: :func:`assign_block` with one fit. Pickles with its fit
    (UMAP and scikit-learn models pickle), which is how a distributed engine ships it to its workers."""

    def __init__(self, fit: SampleFit) -> None:
        self.fit = fit

    def __call__(self) -> Callable[[list[Any]], list[Any]]:
        fit = self.fit

        def worker(rows: list[Any]) -> list[Any]:
            return assign_block(fit, np.asarray(rows, dtype=np.float32)).tolist()

        return worker


def _assign_on(engine: Engine, fit: SampleFit, points: np.ndarray, blocks: list[np.ndarray],
               probabilities: np.ndarray) -> None:
    """Run :func:`assign_block` for ``blocks`` (row positions) on ``engine``, a window of blocks at a time,
    writing each block's probabilities into ``probabilities`` at its rows."""
    factory = _AssignFactory(fit)
    window = max(1, engine.actors) * BLOCKS_PER_WORKER
    logger.info("assigning %d rows in %d blocks on the %s engine", sum(len(b) for b in blocks), len(blocks),
                engine.name)
    for first in range(0, len(blocks), window):
        chunk = blocks[first:first + window]
        batches = [points[rows].tolist() for rows in chunk]
        for index, result in engine.map_batches(factory, batches, label="clustering (assign rows)"):
            probabilities[chunk[index]] = np.asarray(result, dtype=np.float64)

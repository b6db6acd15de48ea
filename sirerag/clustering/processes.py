"""Clustering in several processes, with the same clusters as in one.

UMAP runs on one thread (a fixed seed requires it) and the Gaussian mixtures on one BLAS thread
(:mod:`sirerag.clustering.gmm`), so on a machine with two or more cores the clustering of a tree
level leaves the other cores idle: about 100 s of a 2Wiki build's relatedness tree (13,518
aggregates) ran on one core of two. The local steps of a level (UMAP and a mixture inside each
global cluster) and the re-clustering of each cluster over the token limit depend only on their own
rows, so they can run in worker processes, each on the rows it is given, in any order: the results
are put back in the order the serial code produces them, so the clusters are the same, row for row,
for every number of processes (a test compares them).

Use it around the work that clusters::

    with clustering_processes(2):
        clusters = cluster(embeddings, token_counts, config=config, random_state=224)

Outside such a block, and for matrices of fewer than :data:`MIN_ROWS` rows (where starting the
workers costs more than they save), :func:`~sirerag.clustering.raptor.cluster` runs in this
process. The workers are started on first use (``spawn``: never a copy of a process that has torch's
thread pools) and stopped when the block ends. A worker's numba set-up mirrors this process's: the
same cache folder and, when this process switched UMAP's functions to numba's file cache (the
CLI does, :func:`file_cache_functions`), the same switch, so the workers load what an earlier
build compiled instead of compiling it again.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from concurrent.futures import Future
from typing import Any, Callable, Iterator

logger = logging.getLogger(__name__)

#: Rows below which a matrix is clustered in this process only.
MIN_ROWS = 1000
#: Packages whose module-level numba functions :func:`file_cache_functions` switches to a file cache.
NUMBA_PACKAGES = ("umap", "pynndescent")

_ACTIVE: contextvars.ContextVar["ClusterProcesses | None"] = contextvars.ContextVar("clustering_processes",
                                                                                  default=None)


class ClusterProcesses:
    """A pool of ``processes`` worker processes for clustering steps, started on first use.

    Args:
        processes: how many workers (>= 2; with 1 nothing runs elsewhere, use no pool at all).
    """

    def __init__(self, processes: int) -> None:
        if not isinstance(processes, int) or isinstance(processes, bool) or processes < 2:
            raise ValueError(f"processes must be an integer >= 2, got {processes!r}")
        self.processes = processes
        self._executor: Any = None
        self._failed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future | None:  # Any: a picklable function, its arguments
        """Run ``fn(*args)`` in a worker; None when the workers cannot start (then the caller runs it here)."""
        executor = self._start()
        if executor is None:
            return None
        try:  # a worker process starts at the first submissions
            return executor.submit(fn, *args)
        except OSError as exc:
            self._give_up(exc)
            return None

    def _give_up(self, exc: BaseException) -> None:
        logger.warning("clustering stays in this process: its %d worker processes did not start (%s)",
                       self.processes, exc)
        self._failed = True
        self.close()

    def _start(self) -> Any:
        if self._executor is None and not self._failed:
            import multiprocessing

            unsafe = unguarded_main()
            if unsafe:
                logger.info("clustering stays in this process: worker processes would run %s again, which has no "
                            "'if __name__ == \"__main__\":' guard (add one to cluster in %d processes)", unsafe,
                            self.processes)
                self._failed = True
                return None
            from concurrent.futures import ProcessPoolExecutor

            try:
                self._executor = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("spawn"),
                                                     initializer=_set_up_worker, initargs=_numba_setup())
            except (OSError, ValueError) as exc:  # no processes here (a sandbox, a platform without spawn)
                self._give_up(exc)
            else:
                logger.info("clustering in %d worker processes", self.processes)
        return self._executor

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        if self._executor is not None:
            executor, self._executor = self._executor, None
            executor.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def clustering_processes(processes: int) -> Iterator[ClusterProcesses | None]:
    """Within the block, :func:`~sirerag.clustering.raptor.cluster` runs its independent steps in
    ``processes`` worker processes (0: one per core this process may use; 1: none, everything here). A
    script without an ``if __name__ == "__main__":`` guard keeps the clustering here (:func:`unguarded_main`).

    Yields the pool (None with one process). The workers stop when the block ends.
    """
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 0:
        raise ValueError(f"processes must be an integer >= 0, got {processes!r}")
    from sirerag.embedding import usable_cores

    count = processes or usable_cores()
    pool = ClusterProcesses(count) if count >= 2 else None
    token = _ACTIVE.set(pool)
    try:
        yield pool
    finally:
        _ACTIVE.reset(token)
        if pool is not None:
            pool.close()


def active_pool(rows: int) -> ClusterProcesses | None:
    """The pool of the enclosing :func:`clustering_processes` block when a matrix of ``rows`` rows should use
    it, else None."""
    pool = _ACTIVE.get()
    return pool if pool is not None and rows >= MIN_ROWS else None


def unguarded_main() -> str | None:
    """The file of the main module when a worker process would run its top-level code again, else None.

    A ``spawn`` worker imports the main script of the parent (as ``__mp_main__``) unless it was run as a
    package's ``__main__`` (``python -m pkg``) or there is none (an interactive session, a notebook,
    ``python -c``). A script without an ``if __name__ == "__main__":`` guard around its work would then
    build the index again in every worker, so such a script keeps the clustering in its own process.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if not path or (spec is not None and spec.name.rpartition(".")[2] == "__main__"):
        return None
    try:
        import ast
        from pathlib import Path

        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return str(path)
    return None if any(isinstance(node, ast.If) and _tests_main(node.test) for node in tree.body) else str(path)


def _tests_main(test: Any) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    import ast

    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def file_cache_functions() -> int:
    """Import ``umap`` and ``pynndescent`` and give every module-level jitted function of theirs that has
    no file cache numba's own one (``Dispatcher.enable_caching``), so what one process compiles the next
    one loads. Returns how many functions were switched. This is process set-up: the CLI calls it for
    its own process, and the clustering workers call it when their parent did.

    Functions that cannot be cached (closures over other functions, dynamic globals) are left as numba
    decides: it warns and compiles them in memory, as before.
    """
    import importlib
    import warnings

    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    for package in NUMBA_PACKAGES:
        importlib.import_module(package)
    switched = 0
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in NUMBA_PACKAGES:
            continue
        for value in list(vars(module).values()):
            # numba keeps a dispatcher's cache in a private attribute (NullCache: not cached on disk)
            if isinstance(value, Dispatcher) and isinstance(value._cache, NullCache):  # type: ignore[attr-defined]
                value.enable_caching()
                switched += 1
    warnings.filterwarnings("ignore", message=r"Cannot cache compiled function", module=r"numba\..*")
    logger.debug("numba file cache switched on for %d functions of %s", switched, ", ".join(NUMBA_PACKAGES))
    return switched


def _numba_setup() -> tuple[str, bool]:
    """This process's numba cache folder ("" for numba's default) and whether UMAP's functions have file
    caches (:func:`file_cache_functions` was called)."""
    numba = sys.modules.get("numba")
    folder = str(numba.config.CACHE_DIR or "") if numba is not None else ""
    probe = getattr(sys.modules.get("umap.umap_"), "smooth_knn_dist", None)  # a function UMAP leaves uncached
    if probe is None or numba is None:
        return folder, False
    from numba.core.caching import NullCache

    return folder, not isinstance(getattr(probe, "_cache", None), NullCache)


def _set_up_worker(cache_dir: str, file_cache: bool) -> None:
    """A worker's start: one BLAS and OpenMP thread for its life (it only clusters, and the mixtures are
    fitted on one thread, :mod:`sirerag.clustering.gmm`), and the parent's numba cache folder and file-cache
    switch."""
    import scipy.linalg  # noqa: F401 - load every BLAS and OpenMP library the mixtures use (scipy's own
    import sklearn.mixture  # noqa: F401 - OpenBLAS, libgomp) first: a limit reaches only libraries loaded
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)  # kept: the limits stay until they are restored, which a worker never does
    if cache_dir:
        import numba

        numba.config.CACHE_DIR = cache_dir  # type: ignore[attr-defined]  # numba.config sets its names at import
    if file_cache:
        file_cache_functions()


__all__ = ["MIN_ROWS", "ClusterProcesses", "active_pool", "clustering_processes", "file_cache_functions",
           "unguarded_main"]

"""Clustering in worker processes: the same clusters and counters as in one process, the pool's scope and
its fallback when workers cannot start."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from sirerag.clustering import ClusterStats, cluster, processes
from sirerag.core.config import BuildConfig, ClusteringConfig
from sirerag.core.errors import ConfigError
from sirerag.embedding import usable_cores
from sirerag.pipeline.models import Models


def blobs(n_clusters: int = 6, per: int = 90, dim: int = 24, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_clusters, dim)) * 6.0
    return np.vstack([c + rng.normal(size=(per, dim)) for c in centers]).astype(np.float32)


def run(points: np.ndarray, tokens: list[int], config: ClusteringConfig) -> tuple[list[np.ndarray], ClusterStats]:
    stats = ClusterStats()
    return cluster(points, tokens, config=config, random_state=11, stats=stats), stats


@pytest.mark.slow
def test_worker_processes_give_the_clusters_and_counters_of_one_process(monkeypatch):
    from sirerag.cli.numba_cache import numba_cache_dir

    points = blobs(n_clusters=3, per=200)
    tokens = [30 + (i % 7) * 10 for i in range(len(points))]
    # small clusters and token limits: global, local and re-clustering steps that recurse
    config = ClusteringConfig(reduction_dim=4, max_clusters=8, max_cluster_tokens=600)
    alone, alone_stats = run(points, tokens, config)
    assert alone_stats.reclustered > alone_stats.forced_splits > 0 and alone_stats.umap_fits > 20
    monkeypatch.setattr(processes, "MIN_ROWS", 100)  # this small input uses the workers
    # the workers load UMAP's compiled functions as the CLI's processes do, instead of compiling them
    monkeypatch.setattr(processes, "_numba_setup", lambda: (str(numba_cache_dir()), True))
    with processes.clustering_processes(2) as pool:
        together, together_stats = run(points, tokens, config)
        assert pool is not None and pool._executor is not None  # the workers did run
    assert pool._executor is None  # stopped with the block
    assert [c.tolist() for c in together] == [c.tolist() for c in alone]
    for name in ("umap_fits", "gmm_fits", "reclustered", "forced_splits", "searches"):
        assert getattr(together_stats, name) == getattr(alone_stats, name), name


def _thread_pools() -> list[tuple[str, int]]:
    """In a worker: every BLAS and OpenMP library loaded once the mixtures' modules are, with its threads."""
    import sklearn.mixture  # noqa: F401 - what a clustering task imports
    from threadpoolctl import threadpool_info

    return [(info["filepath"], info["num_threads"]) for info in threadpool_info()]


@pytest.mark.slow
def test_a_worker_fits_on_one_thread_in_every_blas_and_openmp_library():
    # scipy's own OpenBLAS and libgomp load with scipy.linalg and sklearn: a limit set before they load misses
    # them, and two workers of two threads each on two cores fitted the mixtures at half speed
    pool = processes.ClusterProcesses(2)
    try:
        future = pool.submit(_thread_pools)
        assert future is not None
        libraries = future.result(timeout=120)
    finally:
        pool.close()
    assert any("openblas" in path for path, _ in libraries)
    assert all(threads == 1 for _, threads in libraries), libraries


def _refused(*args, **kwargs):
    raise OSError("no processes in this sandbox")


class _FailsAtFirstTask:
    """An executor whose first submission cannot start a worker process."""

    def __init__(self, *args, **kwargs):
        pass

    def submit(self, fn, *args):
        raise OSError("no processes in this sandbox")

    def shutdown(self, **kwargs):
        pass


@pytest.mark.parametrize("executor", [_refused, _FailsAtFirstTask], ids=["at-start", "at-first-task"])
def test_workers_that_cannot_start_leave_the_clustering_here(monkeypatch, caplog, executor):
    import concurrent.futures

    points = blobs(n_clusters=3, per=40)
    tokens = [20] * len(points)
    alone, _ = run(points, tokens, ClusteringConfig())
    monkeypatch.setattr(processes, "MIN_ROWS", 10)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", executor)
    with caplog.at_level(logging.WARNING, logger="sirerag.clustering.processes"):
        with processes.clustering_processes(2) as pool:
            here, _ = run(points, tokens, ClusteringConfig())
            assert pool._executor is None and pool.submit(int, "1") is None
    assert [c.tolist() for c in here] == [c.tolist() for c in alone]
    assert caplog.text.count("did not start (no processes in this sandbox)") == 1


def test_the_pool_is_used_only_inside_its_block_and_for_large_inputs():
    assert processes.active_pool(10**6) is None
    with processes.clustering_processes(1) as pool:
        assert pool is None and processes.active_pool(10**6) is None
    with processes.clustering_processes(3) as pool:
        assert pool is not None and pool.processes == 3
        assert processes.active_pool(processes.MIN_ROWS) is pool
        assert processes.active_pool(processes.MIN_ROWS - 1) is None
        assert pool._executor is None  # nothing started until a step needs it
    assert processes.active_pool(10**6) is None
    with processes.clustering_processes(0) as pool:  # one per usable core
        assert (pool.processes if pool else 1) == usable_cores()


def test_a_build_run_opens_the_pool_its_settings_ask_for(tmp_path):
    config = BuildConfig(clustering=ClusteringConfig(processes=2)).validate()
    with Models(config, tmp_path / "cache"):
        assert processes.active_pool(10**6).processes == 2
    assert processes.active_pool(10**6) is None
    with Models(BuildConfig(clustering=ClusteringConfig(processes=1)).validate(), None):
        assert processes.active_pool(10**6) is None


def test_a_dry_run_clusters_with_the_same_pool(tmp_path):
    from sirerag.pipeline.dryrun import CountingRunner
    from sirerag.pipeline.plan import BuildPlan

    config = BuildConfig(clustering=ClusteringConfig(processes=2)).validate()
    with CountingRunner([], config, BuildPlan.from_config(config), None):
        assert processes.active_pool(10**6).processes == 2
    assert processes.active_pool(10**6) is None


def test_process_counts_are_checked():
    with pytest.raises(ConfigError, match=r"clustering\.processes"):
        ClusteringConfig(processes=-1).validate()
    with pytest.raises(ValueError, match="processes must be an integer >= 0"):
        with processes.clustering_processes(-2):
            pass
    with pytest.raises(ValueError, match="processes must be an integer >= 2"):
        processes.ClusterProcesses(1)


def _main_module(monkeypatch, path, spec_name=None):
    import sys
    import types

    main = types.ModuleType("__main__")
    if path is not None:
        main.__file__ = str(path)
    main.__spec__ = types.SimpleNamespace(name=spec_name) if spec_name else None
    monkeypatch.setitem(sys.modules, "__main__", main)


@pytest.mark.parametrize("source, runs_again", [
    ('import sirerag\nif __name__ == "__main__":\n    sirerag.Index.build("docs", "idx")\n', False),
    ("def main():\n    pass\n\nif '__main__' == __name__:\n    main()\n", False),
    ('import sirerag\nsirerag.Index.build("docs", "idx")\n', True),
    ('def f():\n    if __name__ == "__main__":\n        pass\n', True),  # a guard inside a function guards nothing
    ("this is not python(\n", True),
])
def test_a_script_without_a_main_guard_would_run_again_in_every_worker(tmp_path, monkeypatch, source, runs_again):
    script = tmp_path / "build_it.py"
    script.write_text(source)
    _main_module(monkeypatch, script)
    assert processes.unguarded_main() == (str(script) if runs_again else None)


def test_sessions_and_package_mains_are_never_run_again(tmp_path, monkeypatch):
    _main_module(monkeypatch, None)  # a notebook, the REPL, python -c
    assert processes.unguarded_main() is None
    script = tmp_path / "__main__.py"
    script.write_text("print('work')\n")
    _main_module(monkeypatch, script, spec_name="tool.__main__")  # python -m tool
    assert processes.unguarded_main() is None


def test_an_unguarded_script_keeps_the_clustering_in_its_process(monkeypatch, caplog):
    monkeypatch.setattr(processes, "unguarded_main", lambda: "/home/me/build_it.py")
    with caplog.at_level(logging.INFO, logger="sirerag.clustering.processes"):
        with processes.clustering_processes(2) as pool:
            assert pool.submit(int, "3") is None and pool._executor is None
    assert "run /home/me/build_it.py again, which has no 'if __name__ == \"__main__\":' guard" in caplog.text

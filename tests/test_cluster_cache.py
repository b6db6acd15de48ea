"""Clusters kept on disk: a second clustering of the same rows, settings and seed reads them instead of fitting,
with the same clusters and counters; anything else, or a damaged row, is clustered again; a build's models open
the cache in the build's cache folder."""
from __future__ import annotations

import logging
import sqlite3

import numpy as np
import pytest

from sirerag.clustering import ClusterStats, cluster
from sirerag.clustering.cache import CACHE_FILE, cluster_key, clustering_cache
from sirerag.core.config import BuildConfig, ClusteringConfig

CONFIG = ClusteringConfig(processes=1)


def blobs(n: int = 120, seed: int = 0) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(4, 16)) * 5
    points = centres[rng.integers(0, 4, n)] + rng.normal(size=(n, 16))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points.astype(np.float32), [20] * n


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def _no_fitting(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("clustered again")

    monkeypatch.setattr("sirerag.clustering.raptor._Run.raptor_pass", refuse)


def test_a_second_clustering_reads_the_stored_clusters(tmp_path, monkeypatch):
    points, tokens = blobs()
    first = ClusterStats()
    with clustering_cache(tmp_path) as store:
        computed = cluster(points, tokens, config=CONFIG, random_state=3, stats=first)
        assert (store.hits, store.misses) == (0, 1)
    assert first.umap_fits > 0 and first.gmm_fits > 0
    _no_fitting(monkeypatch)
    again = ClusterStats()
    with clustering_cache(tmp_path) as store:
        read = cluster(points, tokens, config=CONFIG, random_state=3, stats=again)
        assert (store.hits, store.misses) == (1, 0)
    assert _same(read, computed)
    assert again.as_dict() == first.as_dict()  # the counters of the run that computed them
    with pytest.raises(AssertionError, match="clustered again"):  # no block: nothing is read
        cluster(points, tokens, config=CONFIG, random_state=3)


@pytest.mark.parametrize("change", ["seed", "settings", "rows", "tokens"])
def test_other_inputs_are_clustered_again(tmp_path, change):
    points, tokens = blobs()
    with clustering_cache(tmp_path) as store:
        cluster(points, tokens, config=CONFIG, random_state=3)
        seed, config = 3, CONFIG
        if change == "seed":
            seed = 4
        elif change == "settings":
            config = ClusteringConfig(processes=1, threshold=0.2)
        elif change == "rows":
            points = points.copy()
            points[0, 0] += 1e-3
        else:
            tokens = [21] + tokens[1:]
        cluster(points, tokens, config=config, random_state=seed)
        assert (store.hits, store.misses) == (0, 2)


def _read_only(tmp_path, monkeypatch, points, tokens, config):
    """The clusters a cache hit gives (seed 3); fitting fails the test."""
    _no_fitting(monkeypatch)
    with clustering_cache(tmp_path) as store:
        read = cluster(points, tokens, config=config, random_state=3)
        assert (store.hits, store.misses) == (1, 0)
    return read


def test_the_worker_count_is_not_part_of_the_key(tmp_path, monkeypatch):
    points, tokens = blobs()
    with clustering_cache(tmp_path):
        computed = cluster(points, tokens, config=CONFIG, random_state=3)
    assert _same(_read_only(tmp_path, monkeypatch, points, tokens, ClusteringConfig(processes=2)), computed)


def test_clusters_stored_under_the_earlier_key_are_read(tmp_path, monkeypatch):
    points, tokens = blobs()
    with clustering_cache(tmp_path):
        computed = cluster(points, tokens, config=CONFIG, random_state=3)
    key = cluster_key(points, np.asarray(tokens), CONFIG, 3)
    legacy = cluster_key(points, np.asarray(tokens), CONFIG, 3, legacy=True)
    assert key != legacy
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:  # as a version that hashed the worker count wrote it
        assert db.execute("UPDATE clusters SET key = ? WHERE key = ?", (legacy, key)).rowcount == 1
    assert _same(_read_only(tmp_path, monkeypatch, points, tokens, CONFIG), computed)


def test_a_damaged_row_is_clustered_again(tmp_path, caplog):
    points, tokens = blobs()
    with clustering_cache(tmp_path):
        computed = cluster(points, tokens, config=CONFIG, random_state=3)
    with sqlite3.connect(tmp_path / CACHE_FILE) as conn:  # a cluster's row out of range
        payload = bytearray(conn.execute("SELECT payload FROM clusters").fetchone()[0])
        payload[-8:] = np.array([10_000], dtype=np.int64).tobytes()
        conn.execute("UPDATE clusters SET payload = ?", (bytes(payload),))
    with caplog.at_level(logging.WARNING), clustering_cache(tmp_path) as store:
        again = cluster(points, tokens, config=CONFIG, random_state=3)
        assert (store.hits, store.misses) == (0, 1)
    assert _same(again, computed)
    assert "not a clustering of 120 rows" in caplog.text


def test_a_benchmark_keeping_the_reduced_matrices_always_clusters(tmp_path):
    points, tokens = blobs()
    with clustering_cache(tmp_path) as store:
        cluster(points, tokens, config=CONFIG, random_state=3)
        kept = ClusterStats(keep_reduced=True)
        cluster(points, tokens, config=CONFIG, random_state=3, stats=kept)
        assert (store.hits, store.misses) == (0, 1)
    assert kept.reduced  # computed, so its matrices are there


def test_a_builds_models_keep_clusters_in_the_cache_folder(tmp_path):
    from sirerag.pipeline.models import Models

    points, tokens = blobs()
    with Models(BuildConfig(), tmp_path / "cache"):
        cluster(points, tokens, config=CONFIG, random_state=3)
    assert (tmp_path / "cache" / "clusters" / CACHE_FILE).is_file()
    with Models(BuildConfig(), None):  # no cache folder: nothing kept
        cluster(points, tokens, config=CONFIG, random_state=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


@pytest.mark.slow  # two builds of 24 passages with MiniLM, both trees
def test_a_resumed_build_clusters_nothing_again_and_writes_the_same_index(tmp_path, monkeypatch):
    import hashlib

    from sirerag.pipeline.build import build_index
    from tests._tiny_index import write_sample

    corpus = write_sample(tmp_path / "corpus.jsonl", 24)
    config = BuildConfig(seed=7).with_overrides(clustering={"processes": 1})
    cache = tmp_path / "cache"

    def digests(index):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(index.glob("*"))
                if p.is_file() and p.name != "manifest.json"}  # the manifest holds the build's seconds

    build_index(corpus, tmp_path / "first", config, cache_dir=cache, show_progress=False)
    _no_fitting(monkeypatch)
    build_index(corpus, tmp_path / "second", config, cache_dir=cache, show_progress=False)
    assert digests(tmp_path / "second") == digests(tmp_path / "first")

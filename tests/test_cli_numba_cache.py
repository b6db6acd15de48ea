"""The CLI's numba set-up: a cache folder under the user's cache dir, and UMAP's compiled
functions written there by one process and loaded by the next."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sirerag.cli import numba_cache

ROOT = Path(__file__).resolve().parents[1]


def test_cache_folder_is_under_the_user_cache_dir_and_a_user_choice_wins(tmp_path, monkeypatch):
    numba = pytest.importorskip("numba")
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    monkeypatch.delenv(numba_cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = tmp_path / "xdg" / "sirerag" / "numba"
    assert numba_cache.configure_numba_cache() == str(folder) and folder.is_dir()
    assert os.environ[numba_cache.CACHE_ENV] == str(folder) and numba.config.CACHE_DIR == str(folder)
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    monkeypatch.setenv(numba_cache.CACHE_ENV, str(tmp_path / "mine"))
    assert numba_cache.configure_numba_cache() == str(tmp_path / "mine") == numba.config.CACHE_DIR


_RUN = """
import json, sys
import numpy as np
from sirerag.cli.numba_cache import cache_umap_functions, configure_numba_cache
configure_numba_cache()
switched = cache_umap_functions()
from sirerag.clustering.reduce import umap_reduce
import umap.umap_ as umap_
umap_reduce(np.random.default_rng(0).normal(size=(60, 16)).astype(np.float32), n_neighbors=5, dim=2,
            random_state=0)
fns = [umap_.smooth_knn_dist, umap_.compute_membership_strengths]
print(json.dumps({"switched": switched, "hits": sum(sum(f.stats.cache_hits.values()) for f in fns),
                  "misses": sum(sum(f.stats.cache_misses.values()) for f in fns)}))
"""


@pytest.mark.slow
def test_umap_functions_compiled_once_are_loaded_by_the_next_process(tmp_path):
    pytest.importorskip("umap")
    env = {**os.environ, numba_cache.CACHE_ENV: str(tmp_path / "numba"), "PYTHONPATH": str(ROOT)}
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _RUN], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["switched"] > 50 and first["misses"] >= 2 and first["hits"] == 0
    assert second["hits"] >= 2 and second["misses"] == 0
    assert list((tmp_path / "numba").rglob("*.nbi"))

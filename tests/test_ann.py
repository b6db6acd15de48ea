"""The approximate dense index (the ``ann`` component, usearch HNSW): built when forced on
(``dense.ann_min_vectors = 0``) and not below the size, searches that match exact search on a small
index, the manifest's checksums catching a changed file, ``add``/``remove`` keeping it in step with the
pool, and the missing extra named. Leaves-only builds of 40 passages of ``data/`` (MiniLM)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("usearch")

import sirerag  # noqa: E402
from sirerag.core.config import BuildConfig  # noqa: E402
from sirerag.core.errors import ConfigError, IndexFormatError, MissingExtraError  # noqa: E402
from sirerag.pipeline.update import update_index  # noqa: E402
from sirerag.pipeline.verify import verify_index  # noqa: E402
from sirerag.pool.ann import ANN_DIR, ANN_FILE, build_ann  # noqa: E402
from sirerag.pool.loaded import load_index  # noqa: E402
from sirerag.retrievers import dense  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["Who wrote the song?", "Which river flows through the city?", "When was the film released?",
           "Where was the footballer born?", "What company makes the car?"]
FORCED = {"ann_min_vectors": 0}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("ann")
    lines = (ROOT / "data" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    (root / "old.jsonl").write_text("\n".join(lines[:40]) + "\n", encoding="utf-8")
    (root / "new.jsonl").write_text("\n".join(lines[40:48]) + "\n", encoding="utf-8")
    sirerag.Index.build(root / "old.jsonl", root / "forced", trees=[], dense=FORCED,
                        cache_dir=root / "cache").close()
    return root


def _retrievers(index_dir: Path):
    index = load_index(index_dir)
    embedder = dense.index_embedder(index)
    return index, dense.load(index, embedder=embedder), dense.load(index, embedder=embedder, exact=True)


def test_built_when_forced_on_and_not_below_the_size(corpora, tmp_path):
    manifest = json.loads((corpora / "forced" / "manifest.json").read_text(encoding="utf-8"))
    component = manifest["components"]["ann"]
    entries = len(load_index(corpora / "forced").pool.entries)
    assert component["type"] == "usearch-hnsw" and component["vectors"] == entries and component["dim"] == 384
    record = manifest["files"][f"{ANN_DIR}/{ANN_FILE}"]
    assert record["sample_sha256"] and record["size"] == (corpora / "forced" / ANN_DIR / ANN_FILE).stat().st_size
    sirerag.Index.build(corpora / "old.jsonl", tmp_path / "default", trees=[],
                        cache_dir=corpora / "cache").close()
    default = json.loads((tmp_path / "default" / "manifest.json").read_text(encoding="utf-8"))
    assert "ann" not in default["components"] and not (tmp_path / "default" / ANN_DIR).exists()
    assert default["config"]["dense"]["ann_min_vectors"] == 50_000
    assert dense.load(load_index(tmp_path / "default")).ann is None


def test_search_matches_exact_search_on_a_small_index(corpora):
    index, approximate, exact = _retrievers(corpora / "forced")
    assert approximate.ann is not None and exact.ann is None
    for k in (1, 5, 10, 60, 500):
        got, want = approximate.search_many(QUERIES, k), exact.search_many(QUERIES, k)
        assert [[h.entry_id for h in hits] for hits in got] == [[h.entry_id for h in hits] for hits in want]
        assert np.allclose([[h.score for h in hits] for hits in got], [[h.score for h in hits] for hits in want],
                           atol=1e-6)
    assert len(approximate.search(QUERIES[0], 500)) == len(index.pool.entries)  # k past the pool: every entry


def test_the_manifest_catches_a_changed_file(corpora, tmp_path):
    import shutil

    copy = tmp_path / "changed"
    shutil.copytree(corpora / "forced", copy, ignore=shutil.ignore_patterns("cache"))
    path = copy / ANN_DIR / ANN_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte changed: only a checksum sees it
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="pool.usearch.*sample checksum"):
        dense.load(load_index(copy))
    with pytest.raises(IndexFormatError, match="pool.usearch.*sha256"):
        verify_index(copy)
    path.unlink()
    with pytest.raises(IndexFormatError, match="pool.usearch"):
        load_index(copy)


def test_add_and_remove_keep_it_in_step(corpora, tmp_path):
    import shutil

    index_dir = tmp_path / "updated"
    shutil.copytree(corpora / "forced", index_dir, ignore=shutil.ignore_patterns("cache"))
    update_index(index_dir, add=corpora / "new.jsonl", cache_dir=corpora / "cache")
    removed = json.loads((corpora / "old.jsonl").read_text(encoding="utf-8").splitlines()[0])["id"]
    update_index(index_dir, remove=[removed], cache_dir=corpora / "cache")
    verify_index(index_dir)
    before = len(load_index(corpora / "forced").pool.entries)
    index, approximate, exact = _retrievers(index_dir)
    assert len(index.pool.entries) > before
    ann = json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))["components"]["ann"]
    assert ann["vectors"] == len(index.pool.entries) == approximate.ann.rows
    got, want = approximate.search_many(QUERIES, 10), exact.search_many(QUERIES, 10)
    assert [[h.entry_id for h in hits] for hits in got] == [[h.entry_id for h in hits] for hits in want]
    everything = {h.entry_id for h in approximate.search(QUERIES[0], 1000)}
    assert everything == {e.id for e in index.pool.entries}  # the new leaves found, the removed one gone
    assert not any(removed in e.passages for e in index.pool.entries)


def test_the_missing_extra_is_named(corpora, monkeypatch):
    index = load_index(corpora / "forced")
    monkeypatch.setitem(sys.modules, "usearch", None)
    monkeypatch.setitem(sys.modules, "usearch.index", None)
    with pytest.raises(MissingExtraError, match=r"usearch.*pip install 'sirerag\[ann\]'"):
        dense.load(index, embedder=dense.index_embedder(index))
    assert dense.load(index, embedder=dense.index_embedder(index), exact=True).ann is None
    with pytest.raises(MissingExtraError, match=r"sirerag\[ann\]"):
        build_ann(np.eye(4, dtype=np.float32), BuildConfig().dense)


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="dense.ann_dtype"):
        BuildConfig.from_dict({"dense": {"ann_dtype": "f64"}}).validate()
    with pytest.raises(ConfigError, match="dense.ann_min_vectors"):
        BuildConfig.from_dict({"dense": {"ann_min_vectors": -2}}).validate()
    settings = BuildConfig.from_dict({"dense": {"ann_min_vectors": 10}}).validate().dense
    assert settings.builds_ann(10) and not settings.builds_ann(9)
    assert not BuildConfig.from_dict({"dense": {"ann_min_vectors": -1}}).dense.builds_ann(10**9)


def test_the_cli_searches_exactly_on_request(corpora, capsys):
    from sirerag.cli.main import main

    runs = []
    for extra in ([], ["--exact"]):
        assert main(["search", str(corpora / "forced"), QUERIES[0], "--retriever", "dense", "--pool-rule", "native",
                     "--json", *extra]) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1] and json.loads(runs[0].splitlines()[0])

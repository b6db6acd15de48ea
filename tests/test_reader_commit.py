"""A reader sees one committed index, and damaged arrays are found at load (issue 25, items 2 and 7).

A loaded :class:`~sirerag.pool.loaded.LoadedIndex` knows its commit; everything read later (BM25, the graph,
chunks, documents) is checked to come from that commit, so an ``add`` that commits between the
load and a later read gives "the index changed while it was being read" (one line and exit 1
in the CLI), never a passage of one index under the score of another. The swap is made to
happen at a chosen point (no timing). Array files carry a sample checksum in the manifest:
a same-size damaged ``embeddings.npy`` or graph array stops the load, cheaply; a manifest
without it still loads. Builds use a tiny corpus and a fake embedding server.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _llm_server import EmbeddingServer

import sirerag.pool.loaded as pool_mod
from sirerag.cli.main import main
from sirerag.core.config import BuildConfig
from sirerag.core.errors import IndexChangedError, IndexFormatError
from sirerag.core.io import read_json, write_json
from sirerag.core.io.manifest import SAMPLE_BLOCK, SAMPLE_BLOCKS, sample_digest
from sirerag.pipeline.build import build_index
from sirerag.pipeline.update import update_index
from sirerag.pool.loaded import load_index
from sirerag.retrievers import load_retriever

CHANGED = "the index changed while it was being read"


@pytest.fixture(scope="module")
def embeddings():
    server = EmbeddingServer()
    yield server.url
    server.close()


def _rows(start: int, n: int) -> list[dict]:
    return [{"id": f"d{i}", "title": f"Town {i}", "text": f"Town {i} lies on the river Ab{i}. Its mayor is "
             f"Person {i} and it has {i} bridges over the Ab{i}."} for i in range(start, start + n)]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _build(tmp_path: Path, embeddings: str, *, graph: bool = False) -> Path:
    config = BuildConfig(trees=()).with_overrides(chunking={"mode": "passage"},
                                                  embedder={"spec": f"openai:fake@{embeddings}"},
                                                  graph={"enabled": graph})
    out = tmp_path / "idx"
    build_index(_write(tmp_path / "corpus.jsonl", _rows(0, 8)), out, config, show_progress=False)
    return out


@pytest.fixture()
def index_dir(tmp_path, embeddings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return _build(tmp_path, embeddings)


def _add(index_dir: Path, tmp_path: Path) -> None:
    update_index(index_dir, add=_write(tmp_path / "upd.jsonl", _rows(100, 5)))


def test_a_python_caller_holding_an_index_across_an_add_is_stopped(index_dir, tmp_path):
    index = load_index(index_dir)
    _add(index_dir, tmp_path)
    with pytest.raises(IndexChangedError, match=CHANGED):
        load_retriever("bm25", index)  # the pool is the old one, bm25/ would be the new one
    with pytest.raises(IndexChangedError, match=CHANGED):
        index.chunks()
    fresh = load_index(index_dir)  # loading again is the fix the message names
    hits = load_retriever("bm25", fresh).search("Town 102 river", k=3)
    assert hits and fresh.pool.get(hits[0].entry_id).passages == ("d102",)


def test_a_loaded_index_that_did_not_change_reads_as_before(index_dir):
    index = load_index(index_dir)
    assert index.commit and len(index.chunks()) == 8
    assert load_retriever("bm25", index).search("Town 3 mayor", k=1)


def test_a_search_that_overlaps_an_add_is_one_line_and_exit_1(index_dir, tmp_path, capsys, monkeypatch):
    real = pool_mod.load_index

    def load_then_add(directory, **kwargs):
        index = real(directory, **kwargs)
        _add(index_dir, tmp_path)  # the add commits right after the search loaded the pool
        return index

    monkeypatch.setattr(pool_mod, "load_index", load_then_add)
    assert main(["search", str(index_dir), "river bridges", "--retriever", "dense+bm25", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and CHANGED in err[0], err


def _damage_same_size(path: Path) -> None:
    array = np.load(path)
    rng = np.random.default_rng(0)
    np.save(path, rng.standard_normal(array.shape).astype(array.dtype))


def test_a_same_size_damaged_embeddings_file_stops_the_load(index_dir):
    before = (index_dir / "embeddings.npy").stat().st_size
    _damage_same_size(index_dir / "embeddings.npy")
    assert (index_dir / "embeddings.npy").stat().st_size == before
    with pytest.raises(IndexFormatError, match=r"embeddings\.npy: content does not match the manifest's sample "
                                               r"checksum"):
        load_index(index_dir)


def test_a_manifest_without_sample_checksums_still_loads(index_dir):
    manifest = read_json(index_dir / "manifest.json")
    for record in manifest["files"].values():
        record.pop("sample_sha256", None)
    write_json(index_dir / "manifest.json", manifest)
    assert len(load_index(index_dir).pool) == 8


def test_a_same_size_damaged_graph_array_stops_the_ppr_load(tmp_path, embeddings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    index_dir = _build(tmp_path, embeddings, graph=True)
    _damage_same_size(index_dir / "graph" / "entity_embeddings.npy")
    index = load_index(index_dir)  # the pool is fine
    with pytest.raises(IndexFormatError, match=r"graph/entity_embeddings\.npy: content does not match"):
        load_retriever("ppr", index)


def test_the_sample_checksum_reads_a_bounded_part_of_a_large_array(tmp_path, monkeypatch):
    import os

    path = tmp_path / "big.npy"
    np.save(path, np.zeros((4096, 512), dtype=np.float32))  # 8 MiB
    read = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, offset: read.append(n) or real(fd, n, offset))
    first = sample_digest(path)
    assert sum(read) == SAMPLE_BLOCKS * SAMPLE_BLOCK <= path.stat().st_size // 32
    with open(path, "r+b") as fh:  # one byte inside the last sampled block
        fh.seek(path.stat().st_size - 10)
        fh.write(b"\x01")
    assert sample_digest(path) != first

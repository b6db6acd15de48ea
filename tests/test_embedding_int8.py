"""``embedder.precision = "int8"``: MiniLM's int8 ONNX export embeds the build's texts and the index's queries,
under its own spec (cache keys, manifest), made once per machine from the float32 export."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from sirerag.cli.build import config_from_args, register
from sirerag.core.config import BuildConfig, EmbedderConfig
from sirerag.core.errors import ConfigError, MissingExtraError, SireragError
from sirerag.embedding import EmbeddingCache, load_embedder, make_embedder
from sirerag.pipeline.build import check_specs

pytest.importorskip("sentence_transformers")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
SPEC = "st:all-MiniLM-L6-v2"
TEXTS = ["The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
         "Marie Curie won two Nobel Prizes, in physics and in chemistry.",
         "Clara Peeters",
         "The river Thames flows through London and reaches the North Sea at its estuary."]


@pytest.fixture(scope="module")
def int8_home(tmp_path_factory):
    """An XDG cache folder holding MiniLM's float32 and int8 exports (made once for this module)."""
    from sirerag.embedding.query_export import ensure_minilm_int8_export

    home = tmp_path_factory.mktemp("xdg")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(home))
        first = ensure_minilm_int8_export()
        assert first["exported"] is True and first["backend"] == "onnxruntime-int8"
        assert ensure_minilm_int8_export()["exported"] is False  # once per machine
    assert (home / "sirerag" / "onnx-query" / first["key"]).is_dir()  # made from the float32 export
    return home


@pytest.fixture
def at_home(int8_home, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(int8_home))
    return int8_home


def test_int8_vectors_differ_from_float32_but_keep_their_direction(at_home):
    int8 = make_embedder("minilm", precision="int8")
    assert int8.spec == SPEC + "#int8" and int8.precision == "int8"
    a = make_embedder("minilm", precision="float32").encode_documents(TEXTS)
    b = int8.encode_documents(TEXTS)
    assert b.dtype == np.float32 and b.shape == a.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cosines = (a * b).sum(axis=1)
    assert cosines.min() > 0.95
    assert np.abs(a - b).max() > 1e-3  # the weights really are quantised
    np.testing.assert_array_equal(int8.encode_queries(TEXTS), b)  # queries and documents alike


def test_int8_and_float32_vectors_are_cached_apart(at_home, tmp_path):
    for precision in ("float32", "int8"):
        cached = load_embedder("minilm", cache_dir=tmp_path, show_progress=False, precision=precision)
        first = cached.encode_documents(TEXTS)
        np.testing.assert_array_equal(cached.encode_documents(TEXTS), first)  # served from the cache
        cached.cache.close()
    cache = EmbeddingCache(tmp_path)
    try:
        assert {(row["spec"], row["entries"]) for row in cache.summary()} == {(SPEC, 4), (SPEC + "#int8", 4)}
    finally:
        cache.close()


def test_an_int8_build_embeds_its_short_texts_with_the_int8_model(at_home, tmp_path):
    from sirerag.pipeline.models import Models

    config = BuildConfig(embedder=EmbedderConfig(precision="int8")).validate()
    with Models(config, tmp_path / "cache") as models:
        assert models.embedder().spec == SPEC + "#int8"
        assert models.short_text_embedder() is models.embedder()


def _index(root: Path, spec: str) -> Path:
    from sirerag.core.io import write_manifest
    from sirerag.core.types import Node
    from sirerag.pool.store import flatten, save_pool
    from sirerag.trees.base import TreeResult

    nodes = [Node(id=Node.make_id("leaf", "similarity", 0, t, ()), text=t, kind="leaf", tree="similarity", level=0,
                  passages=(f"p{i}",)) for i, t in enumerate(TEXTS)]
    embedder = make_embedder("minilm", precision="int8" if spec.endswith("#int8") else "float32")
    save_pool(root, flatten([TreeResult(nodes=tuple(nodes), embeddings=embedder.encode_documents(TEXTS))]))
    write_manifest(root, components={}, embedder={"spec": spec, "load_spec": "minilm", "dim": 384})
    return root


def test_the_queries_of_an_int8_index_are_encoded_in_int8_and_a_float_index_stays_float(at_home, tmp_path):
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers.dense import index_embedder

    int8 = index_embedder(load_index(_index(tmp_path / "int8", SPEC + "#int8")))
    assert int8.spec == SPEC + "#int8"
    np.testing.assert_array_equal(int8.encode_queries(["Where is the Eiffel Tower?"]),
                                  make_embedder("minilm", precision="int8").encode_queries(["Where is the Eiffel Tower?"]))
    assert index_embedder(load_index(_index(tmp_path / "fp32", SPEC))).spec == SPEC + "#ort"  # the float32 export


def test_an_int8_export_that_strays_from_float32_is_not_kept(at_home, tmp_path, monkeypatch):
    from sirerag.embedding import query_export as qe
    from sirerag.embedding.query_encoder import query_model_dir

    monkeypatch.setattr(qe, "INT8_MIN_COSINE", 1.01)
    with pytest.raises(SireragError, match=r"int8 export of st:all-MiniLM-L6-v2 differs from its float32 export "
                                           r"\(cosine 0\.9\d+ < 1\.01\); it was not kept"):
        qe.quantize_query_model(query_model_dir("53aa51172d142c89"), tmp_path / "int8", source_sha256="x",
                                spec="st:all-MiniLM-L6-v2")
    assert not (tmp_path / "int8").exists()


def test_precision_int8_is_checked_before_any_model_loads():
    with pytest.raises(ConfigError, match=r"^embedder\.precision must be one of 'auto', 'float32', 'bfloat16', "
                                          r"'int8', got 'int4'"):
        BuildConfig(embedder=EmbedderConfig(precision="int4")).validate()
    with pytest.raises(ConfigError, match=r"^embedder\.precision must be 'auto', 'float32' or 'bfloat16' for the st "
                                          r"embedder \(bfloat16 applies to 'minilm' and 'st:' models, int8 to 'minilm' only\)"):
        check_specs(BuildConfig(embedder=EmbedderConfig(spec="st:/no/such/model", precision="int8")).validate())
    with pytest.raises(ConfigError, match=r"^precision must be 'auto' or 'float32' for the openai embedder"):
        make_embedder("openai:text-embedding-3-small", precision="int8")
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["build", "c.jsonl", "--out", "x", "--precision", "int8"])
    assert config_from_args(args).embedder.precision == "int8"


def test_int8_without_onnxruntime_names_the_extra_before_any_work(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
    with pytest.raises(MissingExtraError, match=r"'onnxruntime' is needed for embedder\.precision = 'int8' .*"
                                                r"pip install 'sirerag\[local\]'"):
        check_specs(BuildConfig(embedder=EmbedderConfig(precision="int8")).validate())


@pytest.mark.slow
def test_an_int8_build_records_its_spec_searches_in_int8_and_an_update_keeps_it(at_home, tmp_path):
    from sirerag.cli.main import main
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever

    lines = (ROOT / "data" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    (tmp_path / "old.jsonl").write_text("\n".join(lines[:12]) + "\n", encoding="utf-8")
    (tmp_path / "new.jsonl").write_text("\n".join(lines[12:14]) + "\n", encoding="utf-8")
    index = tmp_path / "index"
    assert main(["build", str(tmp_path / "old.jsonl"), "--out", str(index), "--graph", "--precision", "int8",
                 "--quiet"]) == 0
    manifest = json.loads((index / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["embedder"]["spec"] == SPEC + "#int8"
    assert manifest["embedder"]["query_export"] == {"backend": "onnxruntime-int8", "key": "53aa51172d142c89"}
    loaded = load_index(index)
    int8 = make_embedder("minilm", precision="int8")
    leaves = [i for i, kind in enumerate(loaded.pool.kinds) if kind == "leaf"]
    np.testing.assert_allclose(loaded.pool.embeddings[leaves],
                               int8.encode_documents([loaded.pool.entries[i].text for i in leaves]), atol=1e-6)
    retriever = load_retriever("ppr", loaded)
    assert retriever.embedder.spec == SPEC + "#int8"  # the default retriever's queries are encoded in int8
    assert retriever.search("Who designed the Eiffel Tower?", k=3)
    assert main(["add", str(index), str(tmp_path / "new.jsonl"), "--quiet"]) == 0
    updated = load_index(index)
    assert updated.manifest.embedder.spec == SPEC + "#int8"
    new = [i for i, e in enumerate(updated.pool.entries) if e.id not in set(loaded.pool.ids) and
           updated.pool.kinds[i] == "leaf"]
    assert new
    np.testing.assert_allclose(updated.pool.embeddings[new],
                               int8.encode_documents([updated.pool.entries[i].text for i in new]), atol=1e-6)

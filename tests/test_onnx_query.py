"""The ONNX Runtime query encoder of minilm indexes: config reading, parity with torch, light imports, fallback."""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sirerag.embedding.query_encoder import OnnxQueryEmbedder, pool_tokens, read_pipeline
from sirerag.core.errors import SireragError

ROOT = Path(__file__).resolve().parents[1]
MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
POOLING = {"word_embedding_dimension": 4, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
           "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}


def _folder(root: Path, modules=MODULES, pooling=POOLING, settings=None) -> Path:
    (root / "1_Pooling").mkdir(parents=True)
    (root / "modules.json").write_text(json.dumps(modules))
    (root / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (root / "sentence_bert_config.json").write_text(json.dumps(settings or {"max_seq_length": 256,
                                                                            "do_lower_case": False}))
    return root


def test_the_folder_config_is_followed_and_unsupported_ones_refused(tmp_path):
    pipeline = read_pipeline(_folder(tmp_path / "ok"))
    assert (pipeline.pooling, pipeline.normalize, pipeline.max_seq_length, pipeline.lowercase, pipeline.dim) == \
        ("mean", True, 256, False, 4)
    cls = read_pipeline(_folder(tmp_path / "cls", modules=MODULES[:2], settings={"max_seq_length": 8, "do_lower_case": True},
                                pooling={**POOLING, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}))
    assert (cls.pooling, cls.normalize, cls.max_seq_length, cls.lowercase) == ("cls", False, 8, True)
    with pytest.raises(SireragError, match=r"pooling \['pooling_mode_max_tokens'\] is not supported"):
        read_pipeline(_folder(tmp_path / "max", pooling={**POOLING, "pooling_mode_mean_tokens": False,
                                                         "pooling_mode_max_tokens": True}))
    dense = [*MODULES[:2], {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    with pytest.raises(SireragError, match=r"modules .*Dense'\] are not supported"):
        read_pipeline(_folder(tmp_path / "dense", modules=dense))
    with pytest.raises(SireragError, match=r"modules.json: cannot read the model configuration"):
        read_pipeline(tmp_path / "empty")


def test_mean_pooling_ignores_padding_and_cls_takes_the_first_token():
    hidden = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    mask = np.array([[1, 1, 0], [1, 1, 1]])
    np.testing.assert_allclose(pool_tokens(hidden, mask, "mean"), [hidden[0, :2].mean(0), hidden[1].mean(0)])
    np.testing.assert_array_equal(pool_tokens(hidden, mask, "cls"), hidden[:, 0])


# ---- with the real MiniLM (torch for the reference) ----

def _questions(n: int = 20) -> list[str]:
    with open(ROOT / "data" / "questions.jsonl", encoding="utf-8") as fh:
        return [json.loads(line)["question"] for _, line in zip(range(n), fh)]


@pytest.fixture(scope="module")
def minilm_torch():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("onnx")
    from sirerag.embedding import load_embedder

    return load_embedder("minilm", show_progress=False)


@pytest.fixture(scope="module")
def export_home(tmp_path_factory, minilm_torch):
    """An XDG cache folder holding the MiniLM export (made once for this module)."""
    from sirerag.embedding.query_export import ensure_minilm_query_export

    home = tmp_path_factory.mktemp("xdg")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(home))
        assert ensure_minilm_query_export()["exported"] is True
        assert ensure_minilm_query_export()["exported"] is False  # once per machine
    return home


@pytest.fixture(scope="module")
def dense_index(tmp_path_factory, minilm_torch):
    """A leaves-only index of 60 data/ passages embedded by the torch model, as a build writes it."""
    from sirerag.core.io import write_manifest
    from sirerag.pool.store import flatten, save_pool
    from sirerag.trees.base import TreeResult
    from sirerag.core.types import Node

    with open(ROOT / "data" / "corpus.jsonl", encoding="utf-8") as fh:
        texts = [(r["title"] + "\n" + r["text"]) for r in (json.loads(line) for _, line in zip(range(60), fh))]
    nodes = [Node(id=Node.make_id("leaf", "similarity", 0, t, ()), text=t, kind="leaf", tree="similarity", level=0,
                  passages=(f"p{i}",)) for i, t in enumerate(texts)]
    root = tmp_path_factory.mktemp("index")
    save_pool(root, flatten([TreeResult(nodes=tuple(nodes), embeddings=minilm_torch.encode_documents(texts))]))
    write_manifest(root, components={}, embedder={"spec": minilm_torch.spec, "load_spec": "minilm", "dim": 384})
    return root


@pytest.mark.slow
def test_onnx_queries_match_torch_and_give_the_same_hits(export_home, dense_index, minilm_torch, monkeypatch):
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever

    monkeypatch.setenv("XDG_CACHE_HOME", str(export_home))
    fast = load_retriever("dense", load_index(dense_index))
    assert isinstance(fast.embedder, OnnxQueryEmbedder)
    assert fast.embedder.spec == "st:all-MiniLM-L6-v2#ort" != minilm_torch.spec  # a cache keyed by spec never mixes
    queries = _questions()
    cosines = (fast.embedder.encode_queries(queries) * minilm_torch.encode_queries(queries)).sum(axis=1)
    assert cosines.shape == (20,) and cosines.min() >= 0.9999
    reference = load_retriever("dense", load_index(dense_index), embedder=minilm_torch)
    for query in queries:
        assert [h.entry_id for h in fast.search(query, k=10)] == [h.entry_id for h in reference.search(query, k=10)]


@pytest.mark.slow
def test_dense_search_with_the_export_imports_no_torch(export_home, dense_index, minilm_torch):
    query = _questions(1)[0]
    code = ("import json, sys\nfrom sirerag.cli.main import main\n"
            f"rc = main(['search', {str(dense_index)!r}, {query!r}, '--retriever', 'dense', '--json'])\n"
            "heavy = sorted(m for m in ('torch', 'transformers', 'sentence_transformers', 'sklearn') "
            "if m in sys.modules)\n"
            "print(json.dumps({'rc': rc, 'heavy': heavy}))\n")
    env = {**os.environ, "XDG_CACHE_HOME": str(export_home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == {"rc": 0, "heavy": []}
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever

    reference = load_retriever("dense", load_index(dense_index), embedder=minilm_torch).search(query, k=10)
    assert len(lines) == 2  # one JSON line for the query (its hits inside), then the probe's line
    assert [hit["id"] for hit in json.loads(lines[0])["hits"]] == [h.entry_id for h in reference]


@pytest.mark.slow
def test_without_an_export_search_loads_torch_and_says_how_to_get_the_fast_path(
        export_home, dense_index, tmp_path, monkeypatch, caplog):
    from sirerag.embedding.sentence_transformers import SentenceTransformerEmbedder
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    with caplog.at_level(logging.INFO, logger="sirerag.embedding.query_encoder"):
        slow = load_retriever("dense", load_index(dense_index))
    assert isinstance(slow.embedder, SentenceTransformerEmbedder)
    assert "no ONNX export of MiniLM" in caplog.text and "sirerag cache query-model" in caplog.text
    assert not (tmp_path / "empty" / "sirerag" / "onnx-query").exists()  # a search never exports
    monkeypatch.setenv("XDG_CACHE_HOME", str(export_home))
    fast = load_retriever("dense", load_index(dense_index))
    for query in _questions(5):
        assert [h.entry_id for h in slow.search(query, k=10)] == [h.entry_id for h in fast.search(query, k=10)]
    damaged = tmp_path / "damaged"  # a copy of the export whose model file is broken
    shutil.copytree(export_home / "sirerag", damaged / "sirerag")
    next((damaged / "sirerag").glob("onnx-query/*/model.onnx")).write_bytes(b"not a model")
    monkeypatch.setenv("XDG_CACHE_HOME", str(damaged))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sirerag.embedding.query_encoder"):
        again = load_retriever("dense", load_index(dense_index))
    assert isinstance(again.embedder, SentenceTransformerEmbedder)
    assert "the ONNX export is unusable" in caplog.text and "sirerag cache query-model --force" in caplog.text


@pytest.mark.slow
def test_an_export_that_differs_from_torch_is_not_kept(minilm_torch, tmp_path, monkeypatch):
    from sirerag.embedding import query_export
    from sirerag.embedding.sentence_transformers import minilm_dir

    monkeypatch.setattr(query_export, "MIN_COSINE", 1.5)  # no export can pass
    with pytest.raises(SireragError, match=r"differs from the torch model .* it was not kept"):
        query_export.export_query_model(minilm_torch.model, minilm_dir(), tmp_path / "export", source_sha256="0" * 64,
                                       spec="st:test")
    assert not (tmp_path / "export").exists() and os.listdir(tmp_path) == []


@pytest.mark.slow
def test_the_weights_sit_beside_the_graph_and_an_older_export_is_read_then_replaced(export_home, tmp_path,
                                                                                     monkeypatch):
    import onnx

    from sirerag.embedding.query_encoder import MODEL_FILE, WEIGHTS_FILE, load_minilm_query_embedder
    from sirerag.embedding.query_export import ensure_minilm_query_export

    (folder,) = (export_home / "sirerag" / "onnx-query").iterdir()
    assert (folder / MODEL_FILE).stat().st_size < 1 << 20 < (folder / WEIGHTS_FILE).stat().st_size
    # an export of version 1 (weights inside model.onnx) is still searched with, and a build writes it again
    old = tmp_path / "xdg" / "sirerag" / "onnx-query" / folder.name
    shutil.copytree(folder, old)
    onnx.save_model(onnx.load(str(old / MODEL_FILE)), str(old / MODEL_FILE))  # the weights inline again
    (old / WEIGHTS_FILE).unlink()
    info = json.loads((old / "sirerag-export.json").read_text(encoding="utf-8"))
    (old / "sirerag-export.json").write_text(json.dumps({**info, "version": 1}), encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    reader = load_minilm_query_embedder()
    new = OnnxQueryEmbedder(folder, "st:new")
    queries = _questions(4)
    np.testing.assert_array_equal(reader.encode_queries(queries), new.encode_queries(queries))
    assert ensure_minilm_query_export()["exported"] is True
    assert (old / WEIGHTS_FILE).is_file()
    assert json.loads((old / "sirerag-export.json").read_text(encoding="utf-8"))["version"] == 2


@pytest.mark.slow
def test_build_and_cli_record_the_export(export_home, minilm_torch, tmp_path, monkeypatch, capsys):
    from sirerag.cli.main import main
    from sirerag.core.config import BuildConfig
    from sirerag.pipeline.build import build_index

    monkeypatch.setenv("XDG_CACHE_HOME", str(export_home))
    corpus = tmp_path / "corpus.jsonl"
    with open(ROOT / "data" / "corpus.jsonl", encoding="utf-8") as fh:
        corpus.write_text("".join(line for _, line in zip(range(4), fh)), encoding="utf-8")
    build_index(corpus, tmp_path / "idx", BuildConfig(trees=()), show_progress=False)
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["embedder"]["query_export"] == {"backend": "onnxruntime", "key": "53aa51172d142c89"}
    assert "query_export" in manifest["timings"]
    # a build that writes the export records the same manifest as one that finds it (a resumed build is identical)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "new-home"))
    build_index(corpus, tmp_path / "idx2", BuildConfig(trees=()), show_progress=False)
    assert (tmp_path / "new-home" / "sirerag" / "onnx-query" / "53aa51172d142c89").is_dir()
    again = json.loads((tmp_path / "idx2" / "manifest.json").read_text(encoding="utf-8"))
    assert again["embedder"] == manifest["embedder"]
    monkeypatch.setenv("XDG_CACHE_HOME", str(export_home))
    capsys.readouterr()
    assert main(["cache", "query-model"]) == 0
    assert capsys.readouterr().out.strip() == f"already exported: {export_home}/sirerag/onnx-query/53aa51172d142c89"

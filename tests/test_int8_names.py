"""``graph.name_vectors``: ``auto`` (the default) embeds the entity names with MiniLM's int8 export when the index
embeds with MiniLM in float32 or bfloat16, else with the index embedder; ``int8`` and ``static`` need an index
embedder of MiniLM's size; a graph records its names' embedder, a search loads it again, and ``sirerag add``
embeds only the new names, with the graph's name embedder."""
from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from sirerag.core.config import GraphConfig
from sirerag.core.errors import ConfigError
from sirerag.core.types import Document
from sirerag.graph.store import build_and_save_graph, load_graph, load_name_embedder, name_embedder
from tests.test_graph import PASSAGES, PROPS, TableEmbedder

MINILM = "st:all-MiniLM-L6-v2"
INT8 = MINILM + "#int8"
DATA = Path(__file__).resolve().parents[1] / "data"


class Spec:
    """An index embedder known only by its spec and size (``name_embedder`` reads nothing else)."""

    def __init__(self, spec: str, dim: int = 384) -> None:
        self.spec, self.dim = spec, dim


class FakeInt8:
    """Stands in for MiniLM's int8 export: hashed words, its spec and size, and a log of what it embedded."""

    spec = INT8

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.seen: list[str] = []

    def encode_documents(self, texts):
        self.seen.extend(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
            out[row, -1] += 1.0  # no zero row
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    encode_queries = encode_documents


@pytest.fixture
def fake_int8(monkeypatch):
    """``load_minilm_int8`` answers one FakeInt8 (no export is made)."""
    import sirerag.embedding.query_export as query_export

    fake = FakeInt8()
    monkeypatch.setattr(query_export, "load_minilm_int8", lambda **_: fake)
    return fake


def test_auto_is_the_default_and_the_setting_is_checked():
    assert GraphConfig().name_vectors == "auto"
    for choice in ("auto", "index", "int8", "static"):
        GraphConfig(name_vectors=choice).validate()
    with pytest.raises(ConfigError, match=r"graph\.name_vectors must be one of 'auto', 'index', 'static', 'int8', "
                                          r"got 'fast'"):
        GraphConfig(name_vectors="fast").validate()


@pytest.mark.parametrize("spec", [MINILM, MINILM + "#bf16", MINILM + "#ort"])
def test_auto_picks_the_int8_export_for_minilm_in_float(spec, fake_int8):
    assert name_embedder(GraphConfig(), Spec(spec)) is fake_int8


@pytest.mark.parametrize("spec", [INT8, "st:BAAI/bge-small-en-v1.5", "openai:text-embedding-3-small", "table"])
def test_auto_keeps_the_index_embedder_otherwise(spec, monkeypatch):
    import sirerag.embedding.query_export as query_export

    monkeypatch.setattr(query_export, "load_minilm_int8", lambda **_: pytest.fail("the int8 export was loaded"))
    assert name_embedder(GraphConfig(), Spec(spec)) is None  # MiniLM in int8 already, or another model
    assert name_embedder(GraphConfig(name_vectors="index"), Spec(MINILM)) is None


def test_int8_names_need_an_index_embedder_of_minilm_s_size(fake_int8):
    assert name_embedder(GraphConfig(name_vectors="int8"), Spec(INT8)) is fake_int8  # asked for: int8 names
    with pytest.raises(ConfigError, match=r"graph\.name_vectors = 'int8' gives 384-dimensional name vectors and "
                                          r"the index embedder st:BAAI/bge-base-en-v1\.5 768: use it with a MiniLM"):
        name_embedder(GraphConfig(name_vectors="int8"), Spec("st:BAAI/bge-base-en-v1.5", 768))


def test_static_names_need_an_index_embedder_of_minilm_s_size(monkeypatch):
    import sirerag.embedding.static as static

    monkeypatch.setattr(static, "load_minilm_static", lambda **_: Spec(MINILM + "#m2v"))
    with pytest.raises(ConfigError, match=r"graph\.name_vectors = 'static' gives 384-dimensional name vectors and "
                                          r"the index embedder openai:text-embedding-3-large 3072"):
        name_embedder(GraphConfig(name_vectors="static"), Spec("openai:text-embedding-3-large", 3072))


def test_a_minilm_graph_embeds_its_names_in_int8_records_it_and_loads_it_again(tmp_path, monkeypatch):
    fake = FakeInt8(dim=3)
    import sirerag.embedding.query_export as query_export

    monkeypatch.setattr(query_export, "load_minilm_int8", lambda **_: fake)
    index_embedder = TableEmbedder({"*": [1, 0, 0]})
    index_embedder.spec = MINILM  # type: ignore[misc]
    docs = [Document(id=p, text=f"text of {p}") for p in PASSAGES]
    info = build_and_save_graph(tmp_path, docs, PROPS, embedder=index_embedder, config=GraphConfig(enabled=True))
    graph, meta = load_graph(tmp_path / "graph")
    assert sorted(fake.seen) == sorted(graph.entities)  # every name, and only the names, went to the int8 model
    np.testing.assert_allclose(graph.entity_embeddings, fake.encode_documents(list(graph.entities)))
    record = json.loads((tmp_path / "graph" / "graph.json").read_text())
    assert record["name_embedder"] == INT8 and record["embedder"] == MINILM and meta.name_embedder == INT8
    assert info["settings"]["name_vectors"] == "auto"
    assert load_name_embedder(meta) is fake  # a search embeds a query's unmatched entities with it


def _corpus(path: Path, start: int, n: int) -> Path:
    lines = (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[start:start + n]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_an_add_embeds_only_the_new_names_with_the_graph_s_name_embedder(tmp_path, fake_int8):
    """The index embeds with MiniLM, its names with the (fake) int8 export: an add keeps the old names' rows and
    embeds the new names, and only them, with the int8 export, not with MiniLM."""
    from sirerag.cli.main import main
    from sirerag.pipeline.update import update_index

    index = tmp_path / "index"
    assert main(["build", str(_corpus(tmp_path / "old.jsonl", 0, 8)), "--out", str(index), "--trees", "none",
                 "--chunking", "passage", "--graph", "--cache", str(tmp_path / "cache"), "--quiet"]) == 0
    old, old_meta = load_graph(index / "graph")
    assert old_meta.name_embedder == INT8 and sorted(fake_int8.seen) == sorted(old.entities)
    old_rows = {name: np.array(row) for name, row in zip(old.entities, old.entity_embeddings)}
    fake_int8.seen.clear()
    update_index(index, add=_corpus(tmp_path / "new.jsonl", 8, 4), cache_dir=tmp_path / "cache")
    new, new_meta = load_graph(index / "graph")
    added = set(new.entities) - set(old_rows)
    assert added and sorted(fake_int8.seen) == sorted(added)  # the new names, each once; no old name again
    assert new_meta.name_embedder == INT8
    rows = dict(zip(new.entities, new.entity_embeddings))
    for name in set(new.entities) & set(old_rows):
        np.testing.assert_array_equal(rows[name], old_rows[name])
    np.testing.assert_allclose(np.stack([rows[n] for n in sorted(added)]), fake_int8.encode_documents(sorted(added)),
                               atol=1e-6)


def test_the_names_vectors_are_cached_with_the_build_s_embeddings(tmp_path, fake_int8):
    """A second build of the same corpus with the same cache folder embeds no name again: the (fake) int8 export's
    vectors come from the cache, and the graph's rows are the same."""
    from sirerag.cli.main import main

    corpus, cache = _corpus(tmp_path / "c.jsonl", 0, 8), tmp_path / "cache"
    for out in ("first", "second"):
        fake_int8.seen.clear()
        assert main(["build", str(corpus), "--out", str(tmp_path / out), "--trees", "none", "--chunking", "passage",
                     "--graph", "--cache", str(cache), "--quiet"]) == 0
        if out == "first":
            assert fake_int8.seen
    assert fake_int8.seen == []
    first, second = load_graph(tmp_path / "first" / "graph")[0], load_graph(tmp_path / "second" / "graph")[0]
    assert first.entities == second.entities
    np.testing.assert_array_equal(first.entity_embeddings, second.entity_embeddings)


@pytest.mark.slow  # a MiniLM build with the real int8 export (made first on a machine without it)
def test_a_minilm_build_records_int8_names_and_a_ppr_search_runs(tmp_path):
    pytest.importorskip("onnxruntime")
    from sirerag.cli.main import main
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever

    index = tmp_path / "index"
    assert main(["build", str(_corpus(tmp_path / "c.jsonl", 0, 12)), "--out", str(index), "--trees", "none",
                 "--chunking", "passage", "--graph", "--quiet"]) == 0
    record = json.loads((index / "graph" / "graph.json").read_text())
    assert record["name_embedder"] == INT8 and record["embedder"].startswith(MINILM)
    graph, meta = load_graph(index / "graph")
    assert graph.entity_embeddings.shape == (len(graph.entities), 384)
    np.testing.assert_allclose(np.linalg.norm(graph.entity_embeddings, axis=1), 1.0, atol=1e-4)
    names = load_name_embedder(meta)
    assert names is not None and names.spec == INT8
    first = json.loads((tmp_path / "c.jsonl").read_text().splitlines()[0])
    loaded = load_index(index)
    retriever = load_retriever("ppr", loaded)  # loads the graph's name embedder (load_name_embedder)
    hits = retriever.search_many([f"Where was {first['title']} born?"], k=5)[0]
    retriever.close()
    passages = {e.id: e.passages for e in loaded.pool.entries}
    assert len(hits) == 5 and first["id"] in {p for h in hits for p in passages[h.entry_id]}

"""``graph.name_vectors = "static"``: the entity names embedded by a static embedder distilled from MiniLM
(:mod:`sirerag.embedding.static`), recorded with the graph and used again for a query's unmatched entities."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sirerag.core.config import BuildConfig, GraphConfig
from sirerag.core.errors import ConfigError, MissingExtraError
from sirerag.core.types import Document
from sirerag.graph.store import build_and_save_graph, load_graph, load_name_embedder
from tests.test_graph import PASSAGES, PROPS, TableEmbedder

STATIC_SPEC = "st:all-MiniLM-L6-v2#m2v"


class FakeStatic(TableEmbedder):
    """Stands in for the distilled model: a table of its own, and a log of what it embedded."""

    spec = STATIC_SPEC

    def __init__(self, table: dict[str, list[float]]) -> None:
        super().__init__(table)
        self.seen: list[str] = []

    def encode_documents(self, texts):
        self.seen.extend(texts)
        return super().encode_documents(texts)

    encode_queries = encode_documents


@pytest.fixture
def fake_static(monkeypatch):
    """The static loaders answer a FakeStatic; no distillation runs."""
    import sirerag.embedding.static as static

    fake = FakeStatic({"*": [0, 0, 1], "Alice": [0, 1, 0], "Carol": [0, 1, 0]})
    monkeypatch.setattr(static, "load_minilm_static", lambda **_: fake)
    return fake


def test_name_vectors_setting_is_checked():
    GraphConfig(name_vectors="static").validate()  # the choices and the default: tests/test_int8_names.py
    with pytest.raises(ConfigError, match=r"\[graph\] name_vectors must be a string, got 1"):
        BuildConfig.from_dict({"graph": {"name_vectors": 1}})


def test_static_names_are_embedded_recorded_and_loaded_again(tmp_path, fake_static, monkeypatch):
    docs = [Document(id=p, text=f"text of {p}") for p in PASSAGES]
    index_embedder = TableEmbedder({"*": [1, 0, 0]})
    info = build_and_save_graph(tmp_path, docs, PROPS, embedder=index_embedder,
                                config=GraphConfig(enabled=True, name_vectors="static"))
    graph, meta = load_graph(tmp_path / "graph")
    assert set(fake_static.seen) == set(graph.entities)  # every name went to the static embedder
    alice, carol, bob = (graph.entity_node(n) for n in ("Alice", "Carol", "Bob"))
    np.testing.assert_allclose(graph.entity_embeddings[alice], [0, 1, 0])
    np.testing.assert_allclose(graph.entity_embeddings[bob], [0, 0, 1])
    assert graph.adjacency[alice, carol] == pytest.approx(1.0)  # a synonym edge from the static vectors
    assert info["settings"]["name_vectors"] == "static" and meta.name_embedder == STATIC_SPEC
    assert json.loads((tmp_path / "graph" / "graph.json").read_text())["embedder"] == "table"
    import sirerag.embedding.static as static

    seen = []
    monkeypatch.setattr(static, "load_static_for", lambda spec, **_: seen.append(spec) or fake_static)
    assert load_name_embedder(meta) is fake_static and seen == [STATIC_SPEC]


def test_default_graph_of_another_model_records_no_name_embedder(tmp_path):
    """``auto`` (the default) keeps the index embedder for the names of an index that does not embed with MiniLM."""
    docs = [Document(id=p, text=f"text of {p}") for p in PASSAGES]
    info = build_and_save_graph(tmp_path, docs, PROPS, embedder=TableEmbedder({"*": [1, 0, 0]}),
                                config=GraphConfig(enabled=True))
    _, meta = load_graph(tmp_path / "graph")
    assert "name_vectors" not in info["settings"] and meta.name_embedder is None
    assert load_name_embedder(meta) is None


def test_static_names_need_the_index_dimension(tmp_path, fake_static):
    docs = [Document(id=p, text=f"text of {p}") for p in PASSAGES]
    with pytest.raises(ConfigError, match=r"3-dimensional name vectors and the index embedder table 2"):
        build_and_save_graph(tmp_path, docs, PROPS, embedder=TableEmbedder({"*": [1, 0]}),
                             config=GraphConfig(enabled=True, name_vectors="static"))


def test_query_entities_are_embedded_like_the_names():
    """The PPR retriever embeds a query's entities that match no surface form with the graph's name embedder."""
    from sirerag.retrievers.ppr import PPRRetriever
    from tests.test_title_and_surface_linking import HashEmbedder, corpus

    graph, pool = corpus(2.0)

    class Names(HashEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def encode_documents(self, texts):
            self.seen.extend(texts)
            return super().encode_documents(texts)

    names = Names()
    ppr = PPRRetriever(graph, pool, HashEmbedder(), linking="ner", tagger=lambda q: ["Kowalsky family"],
                       passage_seeds="dense", name_embedder=names)
    ppr.link(["Where did the Kowalsky family live?"], HashEmbedder().encode_queries(["x"]))
    assert names.seen == ["Kowalsky family"]


def test_unknown_static_spec_is_refused():
    from sirerag.embedding.static import load_static_for

    with pytest.raises(ConfigError, match=r"static embedder spec must be 'st:all-MiniLM-L6-v2#m2v'"):
        load_static_for("st:other#m2v")


def test_missing_model2vec_names_the_extra(monkeypatch, tmp_path):
    import sys

    from sirerag.embedding.static import StaticEmbedder

    monkeypatch.setitem(sys.modules, "model2vec", None)  # import model2vec now raises ImportError
    with pytest.raises(MissingExtraError, match=r"sirerag\[static\]"):
        StaticEmbedder(tmp_path, STATIC_SPEC)


@pytest.mark.slow
def test_distilled_minilm_embeds_names():
    """The real distillation (once per machine, then read from its folder): unit rows of MiniLM's dimension,
    the same vectors on a second load, and a name nearer its variant than an unrelated word."""
    pytest.importorskip("model2vec")
    from sirerag.embedding.static import load_minilm_static

    first = load_minilm_static()
    rows = first.encode_documents(["Clara Peeters", "Peeters", "river delta"])
    assert rows.shape == (3, 384) and first.spec == STATIC_SPEC
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)
    assert rows[0] @ rows[1] > rows[0] @ rows[2]
    np.testing.assert_array_equal(load_minilm_static().encode_documents(["Clara Peeters"]), rows[:1])

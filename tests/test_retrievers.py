"""Retrievers: BM25 against rank-bm25, exact dense cosine, top-k order and ties, the retriever registry, the
default retriever, unknown options (each retriever's options are the keywords of its ``load``: ColBERT's build
settings, once silently ignored, are refused)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

import pytest

from sirerag.core.errors import ConfigError, IndexFormatError
from sirerag.retrievers import load_retriever
from sirerag.retrievers.bm25 import BM25Retriever, tokenize
from sirerag.retrievers.dense import DenseRetriever, top_k

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
DATA = Path(__file__).resolve().parents[1] / "data"


def _passages(n: int = 300) -> list[dict]:
    with open(DATA / "corpus.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for _, line in zip(range(n), fh)]


def test_bm25s_scores_match_rank_bm25_reference():
    """bm25s' Robertson variant equals rank-bm25's BM25Okapi up to the constant (k1 + 1)
    factor bm25s leaves out, wherever idf is positive (rank-bm25 floors negative idf)."""
    from rank_bm25 import BM25Okapi

    rows = _passages()
    texts = [r["title"] + "\n" + r["text"] for r in rows]
    k1, b = 1.5, 0.75
    ours = BM25Retriever([r["id"] for r in rows], texts, k1=k1, b=b, method="robertson")
    reference = BM25Okapi([tokenize(t, ours.stopwords) for t in texts], k1=k1, b=b)
    n_docs = len(texts)
    for query in ["Who founded the Hudson's Bay Company?", "population of the Netherlands in 1600",
                  "Tony Award for Best Actress in a Musical", "river delta city port"]:
        tokens = [t for t in tokenize(query, ours.stopwords) if t in ours.vocab]
        # keep query terms whose idf is positive in both (document frequency below half)
        df = {t: sum(t in set(tokenize(x, ours.stopwords)) for x in texts) for t in tokens}
        kept = " ".join(t for t in tokens if df[t] < n_docs / 2)
        expected = reference.get_scores(tokenize(kept, ours.stopwords))
        np.testing.assert_allclose(ours.scores(kept) * (k1 + 1), expected, rtol=1e-4, atol=1e-5)


def test_bm25_ranks_the_passage_with_rare_terms_first():
    rows = _passages()
    ours = BM25Retriever([r["id"] for r in rows], [r["title"] + "\n" + r["text"] for r in rows])
    target = rows[17]
    hits = ours.search(target["title"] + " " + " ".join(target["text"].split()[:25]), k=5)
    assert hits[0].entry_id == target["id"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert ours.search("zzzqqq xyzzy", k=5) == []


def test_top_k_orders_and_breaks_ties_by_position():
    scores = np.array([0.1, 0.9, 0.5, 0.9, 0.3], dtype=np.float32)
    assert top_k(scores, 3).tolist() == [1, 3, 2]
    assert top_k(scores, 10).tolist() == [1, 3, 2, 4, 0]
    assert top_k(scores, 0).tolist() == []


class _FixedEmbedder:
    """A real (if trivial) embedder: bag of letters, for retriever mechanics."""

    spec = "test:letters"
    dim = 26

    def _encode(self, texts):
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    encode_queries = encode_documents = _encode


def test_dense_retriever_exact_cosine():
    emb = _FixedEmbedder()
    texts = ["aaaa", "abab", "zzzz", "abcz"]
    dense = DenseRetriever(emb, ["a", "b", "c", "d"], emb.encode_documents(texts))
    hits = dense.search("aaab", k=3)
    expected = emb.encode_documents(texts) @ emb.encode_queries(["aaab"])[0]
    assert [h.entry_id for h in hits] == ["a", "b", "d"]
    np.testing.assert_allclose([h.score for h in hits], np.sort(expected)[::-1][:3], rtol=1e-6)
    assert [[h.entry_id for h in r] for r in dense.search_many(["zz", "bb"], k=1)] == [["c"], ["b"]]
    with pytest.raises(ValueError, match="dim 26 but the pool embeddings have dim 3"):
        DenseRetriever(emb, ["a"], np.zeros((1, 3), dtype=np.float32))


def test_unknown_retriever_lists_the_choices():
    choices = r"\['bm25', 'colbert', 'dense', 'keyword-graph', 'ppr'\]"
    with pytest.raises(ConfigError, match=rf"retriever must be one of {choices}"):
        load_retriever("splade", index=None)


class _Index:
    """Just enough of an index for choosing and checking retrievers."""

    def __init__(self, graph: bool, linked_titles: int | None = 18, passages: int = 100) -> None:
        from sirerag.core.config import GraphConfig
        from sirerag.core.io.manifest import FORMAT_VERSION, Manifest
        from sirerag.pool.current import GRAPH_SETTINGS

        self.graph, self.path = graph, Path("idx")
        stats = {"passage_nodes": passages} if linked_titles is None else \
            {"passage_nodes": passages, "linked_titles": linked_titles}
        settings = {name: getattr(GraphConfig(), name) for name in GRAPH_SETTINGS}
        components = {"graph": {"type": "entity_graph", "path": "graph", "stats": stats, "settings": settings},
                      "proposition_vectors": {"type": "proposition_vectors", "path": "propositions.npy"}}
        self.manifest = Manifest.from_dict({"format_version": FORMAT_VERSION,
                                            "components": components if graph else {}})

    def component(self, name):
        return "graph" if self.graph and name == "graph" else None


def test_default_retriever_skips_what_the_index_cannot_serve(monkeypatch):
    import sirerag.retrievers as retrievers

    assert retrievers.default_retriever(_Index(graph=False)) == ("dense", {})
    assert retrievers.default_retriever(_Index(graph=True)) == ("ppr", {})  # the measured best
    # a graph retriever first in the list is taken only when the index has a graph
    monkeypatch.setattr(retrievers, "DEFAULTS", (("dense+bm25+ppr", {}), ("dense+bm25", {})))
    assert retrievers.default_retriever(_Index(graph=False)) == ("dense+bm25", {})
    assert retrievers.default_retriever(_Index(graph=True)) == ("dense+bm25+ppr", {})


def test_the_default_fits_the_corpus_shape():
    import sirerag.retrievers as retrievers

    # titles that other passages name (Wikipedia paragraphs): PPR; files titled by their paths: dense
    assert retrievers.default_retriever(_Index(graph=True, linked_titles=18)) == ("ppr", {})
    assert retrievers.default_retriever(_Index(graph=True, linked_titles=5)) == ("ppr", {})
    assert retrievers.default_retriever(_Index(graph=True, linked_titles=4)) == ("dense", {})
    assert retrievers.default_retriever(_Index(graph=True, linked_titles=0)) == ("dense", {})
    # a graph built before the measure: rebuild it
    with pytest.raises(IndexFormatError, match=r"^idx was built by an older sirerag \(no count of linked titles\): "
                                               r"rebuild it with sirerag \S+ \(sirerag build CORPUS --out idx\)$"):
        retrievers.default_retriever(_Index(graph=True, linked_titles=None))


def test_the_graph_counts_titles_named_by_other_passages():
    from sirerag.core.types import Proposition
    from sirerag.graph.build import build_graph

    def prop(doc: str, i: int, *entities: str) -> Proposition:
        return Proposition(id=f"{doc}-{i}", text=" ".join(entities), entities=entities, chunk_id=f"{doc}c",
                           doc_id=doc, index=i)

    props = [prop("p0", 0, "Ada Lovelace", "Charles Babbage"), prop("p1", 0, "Charles Babbage", "London"),
             prop("p2", 0, "London", "Thames"), prop("p3", 0, "Notes", "README")]
    graph = build_graph(["p0", "p1", "p2", "p3"], props,
                        titles=["Ada Lovelace", "Charles Babbage", "London", "notes/readme.md"], embedder=None)
    # Babbage (named in p0) and London (named in p2... and p1) link; Ada is named only in her own passage
    assert graph.stats["linked_titles"] == 2


def test_unknown_options_are_errors_listing_the_valid_ones():
    from sirerag.retrievers import load_retriever

    with pytest.raises(ConfigError, match=r"does not take option\(s\) \['linking'\]; valid: .*'embedder'"):
        load_retriever("dense", _Index(graph=False), linking="ner")
    with pytest.raises(ConfigError, match=r"\['k2'\]; valid: .*'fusion'.*'k1'"):
        load_retriever("dense+bm25", _Index(graph=False), k2=1.0)


def test_the_options_of_a_retriever_are_the_keywords_of_its_load():
    import inspect

    from sirerag.retrievers import RETRIEVERS, options_of
    from sirerag.retrievers.registry import loader

    for name in RETRIEVERS:
        parameters = inspect.signature(loader(name)).parameters.values()
        named = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
        if name == "ppr":  # its keywords and the fields of its settings
            from sirerag.core.config.retrieval import PoolRule, PPRSettings
            from sirerag.retrievers.ppr import OBJECTS

            assert named == set(OBJECTS)
            assert options_of(name) == named | (set(PPRSettings.option_names()) - set(PoolRule.option_names()))
            continue
        assert not [p for p in parameters if p.kind is p.VAR_KEYWORD], f"{name}.load takes **kwargs"
        assert options_of(name) == named
    assert options_of("colbert") == {"checkpoint", "query_maxlen", "timeout"}
    assert {"damping", "linking", "bm25_share", "bridge_hops", "tagger"} <= options_of("ppr")
    assert "entry_score" not in options_of("ppr") and "leaf_share" not in options_of("ppr")
    assert options_of("bm25") == {"k1", "b", "method"} and options_of("dense") == {"embedder", "exact", "ann_expansion_search"}


@pytest.mark.parametrize("option", ["nbits", "doc_maxlen", "rebuild", "build_timeout"])
def test_colbert_refuses_its_build_settings_instead_of_ignoring_them(option):
    """A search never builds (``sirerag index --colbert`` does): these were once taken and dropped. The check
    comes before ColBERT is needed, so it holds without colbert-ai installed."""
    valid = r"\['anchor', 'checkpoint', .*'query_maxlen', 'timeout'\]"
    with pytest.raises(ConfigError, match=rf"retriever 'colbert' does not take option\(s\) \['{option}'\]; "
                                          rf"valid: {valid}"):
        load_retriever("colbert", _Index(graph=False), **{option: 2})
    with pytest.raises(ConfigError, match=rf"retriever 'dense\+colbert' does not take option\(s\) \['{option}'\]"):
        load_retriever("dense+colbert", _Index(graph=False), **{option: 2})


def test_a_load_taking_kwargs_is_refused(monkeypatch):
    import types

    from sirerag.retrievers import registry

    module = types.ModuleType("loose_retriever")
    module.load = lambda index, *, k=1, **rest: None
    monkeypatch.setitem(sys.modules, "loose_retriever", module)
    monkeypatch.setitem(registry.RETRIEVERS, "loose", "loose_retriever")
    with pytest.raises(TypeError, match=r"loose_retriever\.load takes \*\*rest: its options must be named"):
        registry.options_of("loose")

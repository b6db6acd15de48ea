"""Query linking, seed weights and PPR retrieval; a real graph from the data/ sample against igraph."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _tiny_index import CHAIN, CHAIN_QUESTION

from sirerag.graph.build import build_graph
from sirerag.graph.linking import Seeds, fact_seeds, min_max, ner_seeds, reset_vector, top_facts
from sirerag.graph.ppr import personalized_pagerank
from sirerag.core.types import Document, Proposition, document_id

DATA = Path(__file__).resolve().parents[1] / "data"


def prop(i: int, doc: str, *entities: str) -> Proposition:
    return Proposition(id=f"f{i}", text=f"fact {i}", entities=tuple(entities), chunk_id=f"c{doc}", doc_id=doc,
                       index=i)


class OneHot:
    """Embeds each known text as its own axis (exact, hand-checkable cosines)."""

    spec = "onehot"

    def __init__(self, texts: list[str]) -> None:
        self.axis = {t: i for i, t in enumerate(texts)}
        self.dim = len(texts)

    def encode_documents(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, t in enumerate(texts):
            out[row, self.axis[t]] = 1.0
        return out

    encode_queries = encode_documents


@pytest.fixture(scope="module")
def small_graph():
    # A in p1, p2, p3; B in p1; C in p2, p3
    props = [prop(0, "p1", "A", "B"), prop(1, "p2", "A", "C"), prop(2, "p3", "A", "C")]
    names = ["A", "B", "C", "fact 0", "fact 1", "fact 2"]
    return build_graph(["p1", "p2", "p3", "p4"], props, embedder=OneHot(names))


def test_ner_seeds_use_node_specificity(small_graph):
    g = small_graph
    emb = OneHot(["A", "B", "C", "fact 0", "fact 1", "fact 2"])
    seeds = ner_seeds(g, ["A", "C"], emb.encode_documents(["A", "C"]))
    a, c = g.entity_node("A"), g.entity_node("C")
    assert seeds.entities == {a: pytest.approx(1 / 3), c: pytest.approx(1 / 2)}
    assert [(name, node) for name, node, _ in seeds.query_entities] == [("A", a), ("C", c)]
    assert ner_seeds(g, [], np.zeros((0, 6), np.float32)).entities == {}


def test_fact_seeds_weights_and_top_k(small_graph):
    g = small_graph
    a, b, c = (g.entity_node(n) for n in "ABC")
    # facts 0 (A, B) score 1.0 and 1 (A, C) score 0.5
    seeds = fact_seeds(g, [(0, 1.0), (1, 0.5)], top_entities=5)
    assert seeds.entities == {a: pytest.approx((1.0 / 3 + 0.5 / 3) / 2), b: pytest.approx(1.0),
                              c: pytest.approx(0.5 / 2)}
    assert set(fact_seeds(g, [(0, 1.0), (1, 0.5)], top_entities=1).entities) == {b}
    assert fact_seeds(g, [], top_entities=5).entities == {}


def test_top_facts_min_max_scores(small_graph):
    g = small_graph
    query = np.zeros(6, np.float32)
    query[[3, 4]] = [0.8, 0.6]  # fact 0 closest, then fact 1, fact 2 orthogonal
    facts = top_facts(g, query, k=2)
    assert [i for i, _ in facts] == [0, 1]
    assert [s for _, s in facts] == pytest.approx([1.0, 0.75])


def test_reset_vector_passage_weight(small_graph):
    g = small_graph
    dense = np.array([0.2, 0.6, 0.4, 1.0])
    reset = reset_vector(g, Seeds(entities={0: 0.5}), dense, passage_weight=0.05)
    assert reset[0] == 0.5 and reset[1:g.n_entities].sum() == 0
    np.testing.assert_allclose(reset[g.n_entities:], 0.05 * min_max(dense))
    np.testing.assert_allclose(min_max(dense), [0, 0.5, 0.25, 1])
    assert reset_vector(g, Seeds(entities={0: 0.5}), dense, passage_weight=0.0)[g.n_entities:].sum() == 0


def test_pool_entries_score_from_their_nodes(small_graph):
    from sirerag.retrievers.ppr import entry_node_matrix
    from sirerag.core.types import Node, Pool

    g = small_graph
    entries = (
        Node(id="l1", text="x", kind="leaf", tree="similarity", level=0, passages=("p1",)),
        Node(id="s1", text="x", kind="summary", tree="similarity", level=1, passages=("p1", "p2", "p9")),
        Node(id="a1", text="x", kind="aggregate", tree="relatedness", level=0, passages=("p2", "p3"), entity="c"),
        Node(id="n1", text="x", kind="summary", tree="similarity", level=1, passages=("p9",)),
    )
    pool = Pool(entries=entries, embeddings=np.zeros((4, 2), np.float32))
    m = entry_node_matrix(pool, g).toarray()
    mass = np.arange(1, g.n_nodes + 1, dtype=float)
    p1, p2, p3 = (g.passage_index[p] for p in ("p1", "p2", "p3"))
    # the aggregate's entity node (C) is not counted: an entry scores by its passages alone
    np.testing.assert_allclose(m @ mass, [mass[p1], (mass[p1] + mass[p2]) / 2, (mass[p2] + mass[p3]) / 2, 0])


def test_real_graph_from_sample_matches_igraph():
    ig = pytest.importorskip("igraph")
    from sirerag.text.chunking import chunk_documents
    from sirerag.core.config import ChunkingConfig, ExtractionConfig
    from sirerag.extraction.extractor import extract

    docs = [Document(**json.loads(line)) for line in open(DATA / "corpus.jsonl", encoding="utf-8")]
    chunks = chunk_documents(docs, ChunkingConfig(mode="passage"))
    props = extract(chunks, docs, config=ExtractionConfig(), llm=None, show_progress=False).propositions
    g = build_graph([d.id for d in docs], props)
    assert g.n_entities > 1000 and g.stats["cooccurrence_edges"] > 1000
    upper = g.adjacency.tocoo()
    keep = upper.row < upper.col
    graph = ig.Graph(n=g.n_nodes, edges=list(zip(upper.row[keep].tolist(), upper.col[keep].tolist())),
                     directed=False)
    graph.es["weight"] = upper.data[keep].tolist()
    rng = np.random.default_rng(0)
    for _ in range(3):  # HippoRAG 2-style resets: a few entity seeds plus 0.05 x a passage score
        reset = np.zeros(g.n_nodes)
        reset[rng.choice(g.n_entities, 5, replace=False)] = rng.random(5)
        reset[g.n_entities:] = 0.05 * rng.random(len(g.passages))
        ours = personalized_pagerank(g.adjacency, reset, damping=0.5)
        ref = np.array(graph.personalized_pagerank(damping=0.5, reset=reset.tolist(), weights="weight",
                                                   directed=False))
        assert np.abs(ours - ref).sum() < 1e-6


# -- retrieval through the build pipeline with the shipped MiniLM ------------------------------------------

CORPUS, QUESTION = CHAIN, CHAIN_QUESTION


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    from sirerag.core.config import BuildConfig
    from sirerag.embedding import load_embedder
    from sirerag.pipeline.build import build_index
    from sirerag.pool.loaded import load_index

    docs = [Document(id=document_id(t, x), title=t, text=x) for t, x in CORPUS]
    config = BuildConfig(trees=()).with_overrides(chunking={"mode": "passage"}, graph={"enabled": True})
    out = tmp_path_factory.mktemp("ppr_index")
    build_index(docs, out, config, show_progress=False)
    return load_index(out), load_embedder("minilm", show_progress=False), {d.id: d.title for d in docs}


def _titles(index, titles, hits):
    return [titles[index.pool.get(h.entry_id).passages[0]] for h in hits]


@pytest.mark.slow
@pytest.mark.parametrize("linking", ["ner", "fact"])
def test_second_hop_passage_reached_through_an_entity(tiny_index, linking):
    from sirerag.retrievers import load_retriever

    index, embedder, titles = tiny_index
    second_hop = CORPUS[1][1].lower()
    assert not set(QUESTION.lower().rstrip("?").split()) & set(second_hop.replace(",", "").rstrip(".").split())
    dense = _titles(index, titles, load_retriever("dense", index, embedder=embedder).search(QUESTION, k=6))
    assert dense.index("Zielonka") >= 3  # dense retrieval alone misses the second hop
    ppr = load_retriever("ppr", index, embedder=embedder, linking=linking)
    ranked = _titles(index, titles, ppr.search(QUESTION, k=6))
    assert ranked[0] == "Marta Kowalski"
    assert ranked.index("Zielonka") < dense.index("Zielonka")
    assert ranked.index("Zielonka") <= (1 if linking == "ner" else 2)
    assert ppr.fallbacks == 0


@pytest.mark.slow
def test_ppr_ner_falls_back_to_dense_without_entities(tiny_index):
    from sirerag.retrievers import load_retriever

    index, embedder, titles = tiny_index
    ppr = load_retriever("ppr", index, embedder=embedder, linking="ner")
    dense = load_retriever("dense", index, embedder=embedder)
    query = "which waterway is lined with willows?"  # no entity for the tagger
    assert [h.entry_id for h in ppr.search(query, k=3)] == [h.entry_id for h in dense.search(query, k=3)]
    assert ppr.fallbacks == 1


@pytest.mark.slow
def test_dense_plus_ppr_fusion_over_index(tiny_index):
    from sirerag.retrievers import load_retriever

    index, embedder, titles = tiny_index
    fused = load_retriever("dense+ppr", index, embedder=embedder, linking="ner")
    hits = fused.search(QUESTION, k=6)
    assert fused.name == "dense+ppr" and len(hits) == 6
    assert _titles(index, titles, hits)[0] == "Marta Kowalski"
    assert [h.entry_id for h in fused.search_many([QUESTION], k=6)[0]] == [h.entry_id for h in hits]


# -- recognition filter --------------------------------------------------------------------------------------

class Scripted:
    """An LLM-protocol object answering from a script (the filter's parsing is under test)."""

    spec = "scripted"

    def __init__(self, answers):
        self.answers, self.requests = list(answers), []

    def complete_many(self, requests, *, return_exceptions=False):
        from sirerag.llm.base import Completion

        self.requests += list(requests)
        return [Completion(text=self.answers.pop(0), prompt_tokens=0, completion_tokens=0) for _ in requests]

    def complete(self, request):
        return self.complete_many([request])[0]


def test_parse_selection():
    from sirerag.graph.recognition import parse_selection

    assert parse_selection('```json\n{"relevant": [2, 1, 2, 9, "x"]}\n```', 3) == [1, 0]
    assert parse_selection('{"relevant": []}', 3) == []
    assert parse_selection("I think facts 1 and 2", 3) is None
    assert parse_selection('{"facts": [1]}', 3) is None


def test_recognition_filter_keeps_candidates_when_unparsed():
    from sirerag.graph.recognition import RecognitionFilter

    llm = Scripted(['{"relevant": [2]}', "no idea"])
    f = RecognitionFilter(llm)
    kept = f.filter_many(["q1", "q2", "q3"], [["a", "b"], ["c", "d"], []])
    assert kept == [[1], [0, 1], []] and f.unparsed == 1
    assert len(llm.requests) == 2 and "1. a\n2. b" in llm.requests[0].messages[-1][1]


@pytest.mark.slow
def test_fact_filter_removing_every_fact_falls_back_to_dense(tiny_index):
    from sirerag.retrievers import load_retriever

    index, embedder, _ = tiny_index
    ppr = load_retriever("ppr", index, embedder=embedder, linking="fact", fact_filter=Scripted(['{"relevant": []}']))
    dense = load_retriever("dense", index, embedder=embedder)
    assert [h.entry_id for h in ppr.search(QUESTION, k=4)] == [h.entry_id for h in dense.search(QUESTION, k=4)]
    assert ppr.fallbacks == 1
    kept = load_retriever("ppr", index, embedder=embedder, linking="fact", fact_filter=Scripted(['{"relevant": [1]}']))
    seeds = kept.link([QUESTION], embedder.encode_queries([QUESTION]))[0]
    assert len(seeds.candidates) == 5 and seeds.facts == seeds.candidates[:1]


@pytest.mark.slow
@pytest.mark.parametrize("propositions", [False, True])
def test_residual_ranking_wires_into_a_search(tiny_index, propositions):
    from sirerag.graph.residual import ResidualPassages
    from sirerag.retrievers import load_retriever

    index, embedder, titles = tiny_index
    ppr = load_retriever("ppr", index, embedder=embedder, linking="ner", bridge_residual=0.1,
                         bridge_residual_propositions=propositions)
    assert isinstance(ppr.residual, ResidualPassages)
    assert (ppr.residual.propositions is not None) is propositions
    ranked = _titles(index, titles, ppr.search(QUESTION, k=6))
    assert ranked[0] == "Marta Kowalski"
    assert "Zielonka" in ranked[:3]
    assert load_retriever("ppr", index, embedder=embedder, linking="ner").residual is None


@pytest.mark.slow
def test_local_push_ranks_like_the_power_iteration(tiny_index):
    from sirerag.graph.push import LocalPush
    from sirerag.retrievers import load_retriever

    index, embedder, _ = tiny_index
    power = load_retriever("ppr", index, embedder=embedder, walk="power")
    push = load_retriever("ppr", index, embedder=embedder, walk="push", push_tol=1e-9)
    assert isinstance(push.pagerank, LocalPush)
    for question in (QUESTION, "Where was the mayor of Zielonka born?"):
        ours, theirs = push.search(question, k=6), power.search(question, k=6)
        assert [h.entry_id for h in ours] == [h.entry_id for h in theirs]
        np.testing.assert_allclose([h.score for h in ours], [h.score for h in theirs], rtol=1e-4)

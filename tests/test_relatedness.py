"""The relatedness tree: aggregates as leaves, summaries above, the paper's ablation switches."""
from __future__ import annotations

import numpy as np
import pytest
from _scripted import SCRIPTED_DOCS, scripted_reply

from sirerag.core.config import ClusteringConfig, RelatednessConfig, TreeConfig
from sirerag.core.errors import ConfigError
from sirerag.trees.extractive import ExtractiveSummarizer
from sirerag.trees.relatedness import build_relatedness_tree, variant_name
from sirerag.core.types import Proposition

FACTS = [
    ("d1", "Francis Bacon was born in London in 1561.", ("Francis Bacon", "London", "1561")),
    ("d1", "Francis Bacon was the son of Nicholas Bacon.", ("Francis Bacon", "Nicholas Bacon")),
    ("d2", "Head I is a painting by Francis Bacon.", ("Head I", "Francis Bacon")),
    ("d2", "Head I was completed in 1948.", ("Head I", "1948")),
    ("d3", "Nicholas Bacon was Lord Keeper of the Great Seal.", ("Nicholas Bacon", "Lord Keeper of the Great Seal")),
    ("d3", "The weather in the valley was mild.", ()),
    ("d4", "London is the capital of England.", ("London", "England")),
    ("d4", "England is part of the United Kingdom.", ("England", "United Kingdom")),
]


@pytest.fixture(scope="module")
def minilm():  # noqa: ANN201
    from sirerag.embedding import load_embedder

    return load_embedder("minilm", show_progress=False)


@pytest.fixture(scope="module")
def propositions() -> list[Proposition]:
    out = []
    for i, (doc, text, entities) in enumerate(FACTS):
        chunk = f"c-{doc}"
        out.append(Proposition(id=Proposition.make_id(chunk, i, text), text=text, entities=entities,
                               chunk_id=chunk, doc_id=doc, index=i))
    return out


def build(props, minilm, **switches):  # noqa: ANN001, ANN201
    return build_relatedness_tree(props, embedder=minilm, summarizer=ExtractiveSummarizer(max_tokens=60),
                                  clustering=ClusteringConfig(), tree=TreeConfig(levels=3),
                                  relatedness=RelatednessConfig(**switches), random_state=224, show_progress=False)


def kinds(result) -> dict[str, int]:  # noqa: ANN001
    out: dict[str, int] = {}
    for n in result.nodes:
        out[n.kind] = out.get(n.kind, 0) + 1
    return out


def test_default_tree_has_aggregates_and_summaries(propositions, minilm) -> None:  # noqa: ANN001
    result = build(propositions, minilm)
    assert all(n.tree == "relatedness" for n in result.nodes)
    aggregates = [n for n in result.nodes if n.kind == "aggregate"]
    summaries = [n for n in result.nodes if n.kind == "summary"]
    assert aggregates and summaries and "proposition" not in kinds(result)
    assert result.embeddings.shape == (len(result.nodes), minilm.dim)
    assert np.allclose(np.linalg.norm(result.embeddings, axis=1), 1.0, atol=1e-3)
    bacon = next(n for n in aggregates if n.entity == "Francis Bacon")
    assert bacon.text == ("Francis Bacon was born in London in 1561. Francis Bacon was the son of Nicholas Bacon. "
                          "Head I is a painting by Francis Bacon.")
    assert bacon.passages == ("d1", "d2")
    ids = {n.id for n in result.nodes}
    for s in summaries:  # provenance: summaries point to nodes of this tree, passages are the union
        assert set(s.children) <= ids and s.level >= 1
        child_passages = {p for c in result.nodes if c.id in s.children for p in c.passages}
        assert set(s.passages) == child_passages
    assert result.stats.variant == "full"
    assert result.stats.table3["entities"] == 9 and result.stats.table3["propositions_without_entities"] == 1


def test_ablations(propositions, minilm) -> None:  # noqa: ANN001
    a = build(propositions, minilm, summaries=False)
    assert set(kinds(a)) == {"aggregate"} and variant_name(RelatednessConfig(summaries=False)) == "A"
    b = build(propositions, minilm, include_propositions=True)
    assert set(kinds(b)) == {"aggregate", "summary", "proposition"}
    assert kinds(b)["proposition"] == 7  # entity-linked propositions only
    # (B) adds propositions beside the tree: the tree part equals the default build
    full = build(propositions, minilm)
    assert [n.id for n in b.nodes if n.kind != "proposition"] == [n.id for n in full.nodes]
    c = build(propositions, minilm, include_propositions=True, aggregates=False)
    assert set(kinds(c)) == {"proposition", "summary"}
    d = build(propositions, minilm, include_propositions=True, aggregates=False, summaries=False)
    assert set(kinds(d)) == {"proposition"}
    assert [b.stats.variant, c.stats.variant, d.stats.variant] == ["B", "C", "D"]
    with pytest.raises(ConfigError, match="relatedness.aggregates"):
        build(propositions, minilm, aggregates=False)


def test_no_entities_gives_an_empty_tree(minilm) -> None:  # noqa: ANN001
    props = [Proposition(id="f1", text="It rained.", entities=(), chunk_id="c", doc_id="d", index=0)]
    result = build(props, minilm)
    assert result.nodes == () and result.embeddings.shape == (0, minilm.dim)


def full_llm_build(tmp_path, llm_spec: str) -> None:  # noqa: ANN001
    """``build_index`` with an LLM on three short documents: rewrite, extraction, LLM summaries
    and both trees, whatever the small model answers."""
    from sirerag.report.stats import index_stats
    from sirerag.core.config import BuildConfig
    from sirerag.pipeline.build import build_index
    from sirerag.pool.loaded import load_index

    docs = SCRIPTED_DOCS[:3]
    config = BuildConfig().with_overrides(
        chunking={"mode": "passage"}, llm={"spec": llm_spec, "max_concurrency": 1},
        tree={"levels": 2, "summary_max_tokens": 32},
        extraction={"extractor": "llm", "rewrite_max_tokens": 64, "extract_max_tokens": 160, "max_attempts": 1})
    report = build_index(docs, tmp_path / "index", config, cache_dir=tmp_path / "cache", show_progress=False)
    index = load_index(tmp_path / "index")
    assert "similarity" in {e.tree for e in index.pool.entries}
    assert report.components["extractor"] == f"llm:{report.components['llm']}"
    stats = index_stats(tmp_path / "index")
    # every chunk either produced propositions or is recorded as failed, with its raw output
    assert stats["extraction_failures"]["extract"] == report.counts["extraction"]["failed_chunks"]
    produced = {p.chunk_id for p in index.propositions()}
    assert len(produced) + stats["extraction_failures"]["extract"] == len(index.chunks())
    # aggregates exist exactly when the model produced a proposition with an entity (what a
    # 135M model answers is not asserted)
    linked = any(p.entities for p in index.propositions())
    assert stats["pool"].get("relatedness/aggregate/level0", 0) == stats["aggregates"]
    assert (stats["aggregates"] > 0) == linked == ("relatedness" in {e.tree for e in index.pool.entries})


def test_full_build_with_a_scripted_model_produces_both_trees(tmp_path) -> None:  # noqa: ANN001
    """Every LLM stage answered by a scripted server: both trees exist, with aggregates of the shared entities."""
    from _llm_server import FlakyServer

    from sirerag.pool.loaded import load_index

    with FlakyServer(reply=scripted_reply) as server:
        full_llm_build(tmp_path, f"openai:scripted@{server.url}")
    index = load_index(tmp_path / "index")
    trees = {e.tree for e in index.pool.entries}
    assert trees == {"similarity", "relatedness"}
    aggregates = {e.entity for e in index.pool.entries if e.kind == "aggregate"}
    assert {"Diana Luna", "Rome", "Tenerife Ladies Open"} <= aggregates
    assert len(index.propositions()) == 4


@pytest.mark.server
def test_full_build_through_the_llama_cpp_server(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from _llm_server import server_url

    monkeypatch.setenv("OPENAI_API_KEY", "sk-sirerag-relatedness-test")
    full_llm_build(tmp_path, f"openai:smollm2@{server_url()}")

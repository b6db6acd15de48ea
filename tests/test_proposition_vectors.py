"""Propositions embedded once (``propositions.npy``) and the vectors derived from them: an aggregate's
vector is the renormalised (optionally token-weighted) mean of its propositions' rows, no aggregate text
is embedded, the graph's facts reuse the rows, the manifest lists the file, and ``add``/``remove`` keep
its rows aligned with ``propositions.jsonl``."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from sirerag.core.config import (BuildConfig, ChunkingConfig, ClusteringConfig, GraphConfig, RelatednessConfig,
                                 TreeConfig)
from sirerag.core.errors import ConfigError, IndexFormatError
from sirerag.core.types import Proposition
from sirerag.text.tokens import count_tokens_many
from sirerag.trees.aggregates import build_aggregates
from sirerag.trees.extractive import ExtractiveSummarizer
from sirerag.trees.proposition_vectors import (PROPOSITION_VECTORS, derived_vectors, embed_propositions,
                                               load_proposition_vectors, save_proposition_vectors)
from sirerag.trees.relatedness import build_relatedness_tree

FACTS = [
    ("d1", "Francis Bacon was born in London in 1561.", ("Francis Bacon", "London", "1561")),
    ("d1", "Francis Bacon was the son of Nicholas Bacon.", ("Francis Bacon", "Nicholas Bacon")),
    ("d2", "Head I is a painting by Francis Bacon.", ("Head I", "Francis Bacon")),
    ("d2", "Head I was completed in 1948 after a long winter of work in a small studio.", ("Head I", "1948")),
    ("d3", "The weather in the valley was mild.", ()),
    ("d4", "London is the capital of England.", ("London", "England")),
]


class HashEmbedder:
    """A deterministic stand-in: each text's row is seeded by its sha256; records every text it encodes."""

    spec, dim = "test:hash", 16

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode_documents(self, texts):  # noqa: ANN001, ANN201
        self.seen.extend(texts)
        rows = [np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).standard_normal(self.dim)
                for t in texts]
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _propositions() -> list[Proposition]:
    return [Proposition(id=Proposition.make_id(f"c-{doc}", i, text), text=text, entities=ents, chunk_id=f"c-{doc}",
                        doc_id=doc, index=i) for i, (doc, text, ents) in enumerate(FACTS)]


def _mean(rows: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    w = np.ones(len(rows)) if weights is None else weights
    vec = (w[:, None] * rows).sum(axis=0) / w.sum()
    return vec / np.linalg.norm(vec)


def test_each_distinct_proposition_text_is_embedded_once_and_rows_follow_the_input():
    props = _propositions()
    twice = props + [Proposition(id="dup", text="  London is the capital   of England.", entities=("London",),
                                 chunk_id="c-d5", doc_id="d5", index=0)]
    embedder = HashEmbedder()
    rows = embed_propositions(embedder, twice)
    assert rows.shape == (len(twice), 16) and rows.dtype == np.float32
    assert len(embedder.seen) == len(set(embedder.seen)) == len(props)  # the white-space variant is not re-embedded
    assert np.array_equal(rows[-1], rows[5])
    assert [len(t) for t in embedder.seen] == sorted(len(t) for t in embedder.seen)  # one length-sorted call


@pytest.mark.parametrize("mode", ["mean", "token_mean"])
def test_an_aggregate_vector_is_the_renormalised_mean_of_its_propositions_rows(mode):
    props = _propositions()
    rows = embed_propositions(HashEmbedder(), props)
    nodes = build_aggregates(props, max_tokens=512, skip_redundant=False).nodes
    vectors = derived_vectors(nodes, props, rows, mode=mode)
    position = {p.id: i for i, p in enumerate(props)}
    tokens = np.asarray(count_tokens_many([p.text for p in props]), dtype=np.float64)
    multi = 0
    for node, vec in zip(nodes, vectors):
        members = [position[i] for i in node.propositions]
        multi += len(members) > 1
        expected = _mean(rows[members], tokens[members] if mode == "token_mean" else None)
        np.testing.assert_allclose(vec, expected, rtol=0, atol=1e-6)
        assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5
    assert multi >= 2  # the check covers real means, not single rows
    if mode == "token_mean":  # the weighting changes a mean of propositions of different lengths
        plain = derived_vectors(nodes, props, rows, mode="mean")
        assert not np.allclose(plain, vectors)


def test_derived_vectors_name_a_missing_proposition_and_an_unknown_mode():
    props = _propositions()
    nodes = build_aggregates(props, max_tokens=512).nodes
    rows = embed_propositions(HashEmbedder(), props)
    with pytest.raises(ValueError, match="has no vector"):
        derived_vectors(nodes, props[1:], rows[1:], mode="mean")
    with pytest.raises(ValueError, match="'mean' or 'token_mean'"):
        derived_vectors(nodes, props, rows, mode="text")


def _tree(props, embedder, mode, rows=None):  # noqa: ANN001, ANN201
    return build_relatedness_tree(props, embedder=embedder, summarizer=ExtractiveSummarizer(max_tokens=60),
                                  clustering=ClusteringConfig(), tree=TreeConfig(levels=3),
                                  relatedness=RelatednessConfig(aggregate_vectors=mode), random_state=7,
                                  show_progress=False, proposition_vectors=rows)


def test_the_tree_embeds_no_aggregate_text_unless_asked():
    props = _propositions()
    derived, embedded = HashEmbedder(), HashEmbedder()
    rows = embed_propositions(HashEmbedder(), props)
    tree = _tree(props, derived, "mean", rows)
    aggregates = [n for n in tree.nodes if n.kind == "aggregate"]
    assert aggregates and not {n.text for n in aggregates if len(n.propositions) > 1} & set(derived.seen)
    position = {p.id: i for i, p in enumerate(props)}
    for node, vec in zip(tree.nodes, tree.embeddings):
        if node.kind == "aggregate":
            np.testing.assert_allclose(vec, _mean(rows[[position[i] for i in node.propositions]]), atol=1e-6)
    old = _tree(props, embedded, "text")
    assert {n.text for n in aggregates} <= set(embedded.seen)  # ``text``: each aggregate's text is embedded
    assert [n.id for n in old.nodes if n.kind == "aggregate"] == [n.id for n in aggregates]


def test_the_setting_is_checked_and_the_file_must_match_the_propositions(tmp_path):
    with pytest.raises(ConfigError, match="relatedness.aggregate_vectors"):
        RelatednessConfig(aggregate_vectors="median").validate()
    with pytest.raises(ConfigError, match="relatedness.aggregate_vectors"):
        BuildConfig(relatedness=RelatednessConfig(aggregate_vectors=1)).validate()  # type: ignore[arg-type]
    assert load_proposition_vectors(tmp_path, 3) is None  # an index built before the file existed
    save_proposition_vectors(tmp_path, np.ones((2, 4), dtype=np.float32))
    with pytest.raises(IndexFormatError, match="2 rows for 3 propositions"):
        load_proposition_vectors(tmp_path, 3)


DOCS = [
    {"id": "a", "title": "Harwick Bridge", "text": "The Harwick Bridge was designed by Margaret Lowe. The Harwick "
                                                   "Bridge crosses the Elm river at Elmford."},
    {"id": "b", "title": "Margaret Lowe", "text": "Margaret Lowe was an engineer from Glasgow. Margaret Lowe "
                                                  "studied at the University of Glasgow."},
    {"id": "c", "title": "Elm river", "text": "The Elm river flows through Elmford. Elmford is a town in Norfolk."},
    {"id": "d", "title": "Glasgow", "text": "Glasgow is a city in Scotland. The University of Glasgow was "
                                            "founded in 1451."},
]
NEW = [{"id": "e", "title": "Norfolk", "text": "Norfolk is a county in England. Elmford lies in Norfolk near "
                                               "the Elm river."}]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _check_index(index: Path, minilm) -> dict[str, np.ndarray]:  # noqa: ANN001
    """propositions.npy is aligned with propositions.jsonl, listed in the manifest, the rows are the
    propositions' embeddings, and every aggregate's pool row is their renormalised token-weighted mean;
    returns id -> row."""
    from sirerag.pool.loaded import load_index
    from sirerag.core.types import collapse_ws

    loaded = load_index(index)
    props = loaded.propositions()
    rows = load_proposition_vectors(index, len(props))
    assert rows is not None and rows.shape == (len(props), 384) and len(props) > 4
    digest = hashlib.sha256((index / PROPOSITION_VECTORS).read_bytes()).hexdigest()
    assert loaded.manifest.files[PROPOSITION_VECTORS].sha256 == digest
    fresh = minilm.encode_documents([collapse_ws(p.text) for p in props])
    assert float(np.min(np.sum(fresh * rows, axis=1))) > 0.9999
    position = {p.id: i for i, p in enumerate(props)}
    tokens = np.asarray(count_tokens_many([collapse_ws(p.text) for p in props]), dtype=np.float64)
    aggregates = [(e, r) for e, r in zip(loaded.pool.entries, loaded.pool.embeddings) if e.kind == "aggregate"]
    assert aggregates
    for entry, row in aggregates:  # ``token_mean``
        members = [position[i] for i in entry.propositions]
        np.testing.assert_allclose(row, _mean(rows[members], tokens[members]), atol=1e-5)
    return {p.id: r for p, r in zip(props, rows)}


def test_an_index_stores_the_rows_and_add_and_remove_keep_them_aligned(tmp_path):
    from sirerag.embedding import load_embedder
    from sirerag.graph.store import load_graph
    from sirerag.pipeline.build import build_index
    from sirerag.pipeline.update import update_index
    from sirerag.pipeline.verify import verify_index

    minilm = load_embedder("minilm", show_progress=False)
    config = BuildConfig(trees=("relatedness",), seed=7, chunking=ChunkingConfig(mode="passage"),
                         graph=GraphConfig(enabled=True, embed_facts=True),
                         relatedness=RelatednessConfig(aggregate_vectors="token_mean"))
    index = tmp_path / "index"
    build_index(_write(tmp_path / "old.jsonl", DOCS), index, config, show_progress=False)
    built = _check_index(index, minilm)
    graph, _ = load_graph(index / "graph")
    assert len(graph.facts) and all(np.array_equal(built[f.id], row)
                                    for f, row in zip(graph.facts, graph.fact_embeddings))  # the same rows reused
    from sirerag.pool.loaded import load_index

    record = load_index(index).manifest.component("proposition_vectors")
    assert record.path == PROPOSITION_VECTORS and record.rows == len(built)
    update_index(index, add=_write(tmp_path / "new.jsonl", NEW))
    added = _check_index(index, minilm)
    assert set(built) < set(added)
    assert all(np.array_equal(built[i], added[i]) for i in built)  # old rows kept as they were
    update_index(index, remove=["b"])
    removed = _check_index(index, minilm)
    verify_index(index)
    np.save(index / PROPOSITION_VECTORS, np.zeros((2, 384), np.float32), allow_pickle=False)
    with pytest.raises(IndexFormatError, match="rows for"):
        load_proposition_vectors(index, len(removed))
    assert set(removed) < set(added) and all(np.array_equal(added[i], removed[i]) for i in removed)


def test_short_texts_same_uses_the_index_embedder_and_auto_the_onnx_export_when_there_is_one(tmp_path):
    from sirerag.core.config import EmbedderConfig
    from sirerag.embedding import load_short_text_embedder
    from sirerag.embedding.query_export import export_available
    from sirerag.pipeline.models import Models

    with pytest.raises(ConfigError, match="embedder.short_texts"):
        EmbedderConfig(short_texts="onnx").validate()
    with Models(BuildConfig(embedder=EmbedderConfig(short_texts="same")), tmp_path / "c1") as models:
        assert models.short_text_embedder() is models.embedder()
    assert load_short_text_embedder("st:/no/such/model") is None  # only minilm has a fast path
    if export_available():
        fast = load_short_text_embedder("minilm", cache_dir=tmp_path / "c3")
        if fast is not None:  # the export is written by any minilm build (the index test above runs one)
            assert fast.spec.endswith("#ort") and fast.spec != "st:all-MiniLM-L6-v2"


def test_short_texts_use_every_usable_core_and_get_the_same_vectors_as_with_one():
    from sirerag.embedding import load_short_text_embedder, usable_cores
    from sirerag.embedding.query_encoder import OnnxQueryEmbedder, load_minilm_query_embedder
    from sirerag.embedding.query_export import export_available

    fast = load_short_text_embedder("minilm") if export_available() else None
    if fast is None:
        pytest.skip("no ONNX export of MiniLM on this machine (any minilm build writes it)")
    assert isinstance(fast, OnnxQueryEmbedder) and fast.session.get_session_options().intra_op_num_threads == \
        usable_cores() >= 1
    one = load_minilm_query_embedder(threads=1)
    assert one.session.get_session_options().intra_op_num_threads == 1
    texts = [d["text"] for d in DOCS + NEW] + ["Kraków Creek", "Marta Kowalski", "the Oder"] * 30
    assert np.array_equal(fast.encode_documents(texts), one.encode_documents(texts))  # bitwise: threads only split work


def test_an_index_built_before_the_setting_is_refused_by_an_update(tmp_path):
    """An index built before ``relatedness.aggregate_vectors`` is not updated with a guess at how its aggregates
    were embedded: the update stops in one line saying to rebuild, before anything is written."""
    from sirerag.pipeline.build import build_index
    from sirerag.pipeline.update import update_index

    config = BuildConfig(trees=("relatedness",), seed=7, chunking=ChunkingConfig(mode="passage"))
    index = tmp_path / "index"
    build_index(_write(tmp_path / "old.jsonl", DOCS), index, config, show_progress=False)
    manifest = json.loads((index / "manifest.json").read_text(encoding="utf-8"))  # as an older build wrote it
    del manifest["config"]["relatedness"]["aggregate_vectors"]
    (index / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    written = (index / "manifest.json").read_bytes()
    with pytest.raises(IndexFormatError, match=r"was built by an older sirerag \(no relatedness.aggregate_vectors "
                                               r"setting\): rebuild it with sirerag \S+ \(sirerag build CORPUS"):
        update_index(index, add=_write(tmp_path / "new.jsonl", NEW))
    assert (index / "manifest.json").read_bytes() == written


def test_a_graph_without_the_relatedness_tree_stores_the_rows_for_bridging_and_add_keeps_them(tmp_path):
    from sirerag.embedding import load_embedder
    from sirerag.pipeline.build import build_index
    from sirerag.pipeline.update import update_index
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever

    minilm = load_embedder("minilm", show_progress=False)
    config = BuildConfig(trees=(), seed=7, chunking=ChunkingConfig(mode="passage"), graph=GraphConfig(enabled=True))
    index = tmp_path / "index"
    build_index(_write(tmp_path / "old.jsonl", DOCS), index, config, show_progress=False)

    def rows() -> dict[str, np.ndarray]:
        loaded = load_index(index)
        props = loaded.propositions()
        stored = load_proposition_vectors(index, len(props))
        assert stored is not None and len(props) > 4 and loaded.manifest.component("proposition_vectors") is not None
        fresh = minilm.encode_documents([p.text for p in props])
        assert float(np.min(np.sum(fresh * stored, axis=1))) > 0.9999
        assert {e.kind for e in loaded.pool.entries} == {"leaf"}  # no tree: only the rows were added
        ppr = load_retriever("ppr", loaded)
        assert ppr.bridge is not None and ppr.bridge_settings.hops == 2  # bridging is on, from the stored rows
        return {p.id: r for p, r in zip(props, stored)}

    built = rows()
    update_index(index, add=_write(tmp_path / "new.jsonl", NEW))
    added = rows()
    assert set(built) < set(added) and all(np.array_equal(built[i], added[i]) for i in built)

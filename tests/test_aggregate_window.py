"""``relatedness.aggregate_vectors = "window"``: an aggregate the embedder reads whole is embedded as text,
one longer than the embedder's input window gets the token-weighted mean of the propositions inside the
window (the part of the text the embedder would have read), and an embedder that does not tell its window
embeds every text."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from sirerag.core.config import ClusteringConfig, RelatednessConfig, TreeConfig
from sirerag.core.types import Node, Proposition
from sirerag.embedding import TokenWindow, token_window
from sirerag.trees.aggregates import build_aggregates
from sirerag.trees.extractive import ExtractiveSummarizer
from sirerag.trees.proposition_vectors import embed_propositions, node_vectors
from sirerag.trees.relatedness import build_relatedness_tree
from test_proposition_vectors import HashEmbedder

FACTS = [
    ("d1", "Ada Quill was born in Lisbon.", ("Ada Quill", "Lisbon")),
    ("d1", "Ada Quill wrote the novel Grey Harbour in the winter of her fortieth year.", ("Ada Quill", "Grey Harbour")),
    ("d2", "Grey Harbour was translated into nine languages by a team of friends.", ("Grey Harbour",)),
    ("d2", "Ada Quill married the painter Tomas Vey.", ("Ada Quill", "Tomas Vey")),
    ("d3", "Lisbon lies on the Tagus.", ("Lisbon", "Tagus")),
]


class WordWindowEmbedder(HashEmbedder):
    """The seeded stand-in with a window: a text's tokens are its words plus two special tokens, and it
    reads at most ``limit`` of them."""

    spec, dim = "test:words", 8

    def __init__(self, limit: int = 12) -> None:
        super().__init__()
        self.limit = limit

    @property
    def max_input_tokens(self) -> int:
        return self.limit

    def count_input_tokens(self, texts):  # noqa: ANN001, ANN201
        return [len(t.split()) + 2 for t in texts]


class NoWindow(WordWindowEmbedder):
    max_input_tokens = None  # type: ignore[assignment]  # an API embedder: no window it tells
    count_input_tokens = None  # type: ignore[assignment]


class Wrapper:
    """What a cache does: holds the real embedder as ``inner``."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner, self.spec, self.dim = inner, inner.spec, inner.dim

    def encode_documents(self, texts):  # noqa: ANN001, ANN201
        return self.inner.encode_documents(texts)


def _propositions() -> list[Proposition]:
    return [Proposition(id=Proposition.make_id(f"c-{doc}", i, text), text=text, entities=ents, chunk_id=f"c-{doc}",
                        doc_id=doc, index=i) for i, (doc, text, ents) in enumerate(FACTS)]


def _unit(vec: np.ndarray) -> np.ndarray:
    return vec / np.linalg.norm(vec)


def test_a_long_aggregate_gets_the_window_weighted_mean_and_a_short_one_its_text():
    props = _propositions()
    rows = embed_propositions(WordWindowEmbedder(), props)
    nodes = list(build_aggregates(props, max_tokens=512).nodes)
    by_entity = {n.entity: n for n in nodes}
    ada, lisbon = by_entity["Ada Quill"], by_entity["Lisbon"]
    embedder = WordWindowEmbedder(limit=13)  # 11 words of text fit: Lisbon's 6 + 5
    out = node_vectors(nodes, props, rows, Wrapper(embedder), mode="window")
    assert lisbon.text in embedder.seen and ada.text not in embedder.seen
    np.testing.assert_allclose(out[nodes.index(lisbon)], WordWindowEmbedder().encode_documents([lisbon.text])[0],
                               atol=1e-6)
    # Ada Quill: 6 words, then 14 (only 5 of them inside the window), then 6 (outside): weights 6 and 5
    assert [len(p.text.split()) for p in props[:2]] == [6, 14] and ada.propositions[:2] == (props[0].id, props[1].id)
    np.testing.assert_allclose(out[nodes.index(ada)], _unit(6 * rows[0] + 5 * rows[1]), atol=1e-6)


def test_the_same_text_listed_under_two_proposition_ids_counts_once():
    props = _propositions()
    twin = Proposition(id="p-twin", text=props[0].text, entities=props[0].entities, chunk_id="c-d9", doc_id="d9",
                       index=0)
    rows = embed_propositions(WordWindowEmbedder(), props + [twin])
    text = " ".join(p.text for p in props[:2])  # 20 words: longer than the window of 11
    merged = Node(id="n", text=text, kind="aggregate", tree="relatedness", level=0,
                  propositions=(props[0].id, props[1].id, "p-twin"), passages=("d1", "d9"))
    out = node_vectors([merged], props + [twin], rows, WordWindowEmbedder(limit=13), mode="window")
    np.testing.assert_allclose(out[0], _unit(6 * rows[0] + 5 * rows[1]), atol=1e-6)
    other = Node(id="m", text="a text that is not its propositions joined " * 3, kind="aggregate", tree="relatedness",
                 level=0, propositions=(props[0].id, props[1].id), passages=("d1",))
    embedder = WordWindowEmbedder(limit=13)
    node_vectors([other], props, rows, embedder, mode="window")
    assert embedder.seen == [other.text]  # not made of its propositions: its own text, never a guess


def test_an_embedder_without_a_window_embeds_every_text(caplog):
    props = _propositions()
    nodes = list(build_aggregates(props, max_tokens=512).nodes)
    embedder = NoWindow()
    assert token_window(Wrapper(embedder)) is None and token_window(Wrapper(WordWindowEmbedder())) is not None
    with caplog.at_level(logging.INFO, logger="sirerag.trees.proposition_vectors"):
        out = node_vectors(nodes, props, embed_propositions(NoWindow(), props), embedder, mode="window")
    assert embedder.seen == [n.text for n in nodes] and out.shape == (len(nodes), 8)
    assert "does not tell its input window" in caplog.text


def test_the_tree_takes_the_setting_and_it_is_checked():
    props = _propositions()
    embedder = WordWindowEmbedder(limit=12)
    tree = build_relatedness_tree(props, embedder=embedder, summarizer=ExtractiveSummarizer(max_tokens=60),
                                  clustering=ClusteringConfig(), tree=TreeConfig(levels=2),
                                  relatedness=RelatednessConfig(aggregate_vectors="window"), random_state=7,
                                  show_progress=False)
    aggregates = [n for n in tree.nodes if n.kind == "aggregate"]
    long = [n for n in aggregates if len(n.text.split()) > 10]
    assert long and not {n.text for n in long} & set(embedder.seen)
    assert {n.text for n in aggregates if len(n.text.split()) <= 10} <= set(embedder.seen)
    RelatednessConfig(aggregate_vectors="window").validate()
    from sirerag.core.errors import ConfigError

    with pytest.raises(ConfigError, match="'window'"):
        RelatednessConfig(aggregate_vectors="head").validate()


def test_minilm_tells_its_window_and_an_aggregate_counts_as_its_propositions_summed():
    from sirerag.embedding import load_embedder

    minilm = load_embedder("minilm", show_progress=False)
    window = token_window(minilm)
    assert isinstance(window, TokenWindow) and window.max_input_tokens == 256
    special = window.count_input_tokens([""])[0]
    assert special == 2  # [CLS] and [SEP]
    props = _propositions() + [Proposition(id="p-x", text="Vey's café (1907–1931), e.g. \"Porto\"—closed.",
                                           entities=("Ada Quill",), chunk_id="c-d4", doc_id="d4", index=0)]
    for node in build_aggregates(props, max_tokens=512).nodes:
        parts = window.count_input_tokens([p.text for p in props if p.id in node.propositions])
        assert window.count_input_tokens([node.text])[0] == sum(n - special for n in parts) + special
    assert window.count_input_tokens(["word " * 400])[0] == 402  # counted before the cut


def test_an_index_built_and_updated_with_window_vectors(tmp_path):
    import json

    from sirerag.core.config import BuildConfig, ChunkingConfig
    from sirerag.embedding import load_embedder
    from sirerag.pipeline.build import build_index
    from sirerag.pipeline.update import update_index
    from sirerag.pool.loaded import load_index
    from sirerag.trees.proposition_vectors import load_proposition_vectors

    def write(name: str, rows: list[dict]):  # noqa: ANN202
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return path

    towns = ["Elmford", "Harwick", "Glasgow", "Norwich", "Ipswich", "Bristol", "Leeds", "Derby", "Bath", "York"]
    long_text = " ".join(f"Margaret Lowe designed the bridge number {i} over the river at {towns[i % 10]} in "
                         f"the year {1900 + i}." for i in range(30))
    docs = [{"id": "a", "title": "Margaret Lowe", "text": long_text},
            {"id": "b", "title": "Elmford", "text": "Elmford is a town in Norfolk. Elmford lies on the Elm river."}]
    config = BuildConfig(trees=("relatedness",), seed=7, chunking=ChunkingConfig(mode="passage"),
                         relatedness=RelatednessConfig(aggregate_vectors="window"))
    index = tmp_path / "index"
    build_index(write("c.jsonl", docs), index, config, show_progress=False)
    update_index(index, add=write("n.jsonl", [{"id": "c", "title": "Norfolk", "text": "Norfolk is a county in "
                                               "England. Elmford and Norwich lie in Norfolk."}]))
    loaded = load_index(index)
    assert loaded.manifest.build_config().relatedness.aggregate_vectors == "window"
    props = loaded.propositions()
    rows = load_proposition_vectors(index, len(props))
    minilm = load_embedder("minilm", show_progress=False)
    window = token_window(minilm)
    aggregates = [(e, r) for e, r in zip(loaded.pool.entries, loaded.pool.embeddings) if e.kind == "aggregate"]
    long = [(e, r) for e, r in aggregates if window.count_input_tokens([e.text])[0] > 256]
    short = [(e, r) for e, r in aggregates if window.count_input_tokens([e.text])[0] <= 256]
    assert long and short and any("c" in e.passages for e, _ in short)  # the add made some
    texts = minilm.encode_documents([e.text for e, _ in short])
    assert float(np.min(np.sum(texts * np.vstack([r for _, r in short]), axis=1))) > 0.9999  # embedded as text
    position = {p.id: i for i, p in enumerate(props)}
    for entry, row in long:
        sizes = [n - 2 for n in window.count_input_tokens([props[position[i]].text for i in entry.propositions])]
        kept, weights, budget = [], [], 254
        for i, size in zip(entry.propositions, sizes):
            if budget <= 0:
                break
            kept.append(position[i])
            weights.append(min(size, budget))
            budget -= size
        expected = _unit((np.asarray(weights, dtype=np.float64)[:, None] * rows[kept]).sum(axis=0))
        np.testing.assert_allclose(row, expected, atol=1e-5)
        assert len(kept) < len(entry.propositions)  # the propositions past the window do not count

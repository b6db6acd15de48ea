"""sirerag.Index, the Python front door: build settings checked before any work, search results that carry
their text and provenance (frozen), batch search, add/remove/export through the pipeline, ``import sirerag``
staying cheap, and retrievers (and the Index) as context managers that close what they hold."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _tiny_index import ROWS, write_corpus

import sirerag
from sirerag.api import build_config
from sirerag.core.config import BuildConfig
from sirerag.core.errors import ConfigError, InputError
from sirerag.retrievers import load_retriever
from sirerag.retrievers.base import Hit
from sirerag.retrievers.hybrid import FusionRetriever
from sirerag.retrievers.pool_rank import PoolRanker, describe
from sirerag.core.types import Node, Pool

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    with sirerag.Index.build(write_corpus(root / "corpus.jsonl"), root / "index", trees=[]) as built:
        yield built


def test_import_sirerag_stays_cheap_and_exports_the_api_lazily():
    code = ("import sys, sirerag\nheavy = [m for m in ('numpy', 'sirerag.api', 'sirerag.pool.store') if m in sys.modules]\n"
            "print(heavy, sirerag.Index.__module__, sirerag.SearchResult.__module__, sorted(sirerag.__all__))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[] sirerag.api sirerag.results ['Answer', 'Index', 'SearchResult', " \
                                         "'__version__']"


def test_search_results_carry_text_title_and_provenance(index):
    results = index.search("Who designed the Harwick Bridge?", k=2)
    assert len(results) == 2
    best = results[0]
    assert isinstance(best, sirerag.SearchResult)
    assert (best.title, best.kind, best.tree, best.level, best.passages) == \
        ("Harwick Bridge", "leaf", "similarity", 0, ("harwick",))
    assert best.text == index.pool.get(best.entry_id).text and "Margaret Lowe" in best.text
    assert best.score >= results[1].score
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field"):
        best.score = 1.0  # type: ignore[misc]
    assert best.to_dict()["passages"] == ["harwick"]


def test_search_many_matches_single_searches_and_checks_its_arguments(index):
    queries = ["Okavango Delta", "Elm river North Sea"]
    batch = index.search_many(queries, k=2, retriever="bm25")
    single = [index.search(q, k=2, retriever="bm25") for q in queries]
    assert [[r.entry_id for r in row] for row in batch] == [[r.entry_id for r in row] for row in single]
    assert batch[0][0].passages == ("okavango",) and batch[1][0].passages == ("elm",)
    assert index.search_many([], k=3) == []
    with pytest.raises(InputError, match="query must be a question or keywords"):
        index.search("   ")
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        index.search("bridge", k=0)
    with pytest.raises(ConfigError, match=r"^retriever 'bm25' does not take option\(s\) \['linking'\]; "
                                          r"valid: \[[^\n]*\]$"):
        index.search("bridge", retriever="bm25", linking="ner")


def test_an_option_no_retriever_takes_is_one_line_naming_it(index):
    """``search``'s ``**options`` are checked against the retriever's options (the default one's too), in one
    line naming the option, before any retriever loads; ``ask`` checks them before it opens the reader."""
    loaded = dict(index._retrievers)
    for retriever in (None, "dense+bm25"):
        with pytest.raises(ConfigError, match=r"^retriever '[a-z0-9+]+' does not take option\(s\) \['colour'\]; "
                                              r"valid: \[[^\n]*'pool_rule'[^\n]*\]$"):
            index.search("bridge", retriever=retriever, colour="red")
        with pytest.raises(ConfigError, match=r"does not take option\(s\) \['colour'\]"):
            index.search_many(["bridge"], retriever=retriever, colour="red")
    assert index._retrievers == loaded
    nobody = "openai:m@http://127.0.0.1:9/v1"  # opening this reader would fail on its endpoint check
    with pytest.raises(ConfigError, match=r"^retriever 'bm25' does not take option\(s\) \['colour'\]"):
        index.ask("bridge", nobody, retriever="bm25", colour="red")


def test_a_retriever_is_loaded_once_per_name_and_options(index):
    assert index.retriever("bm25") is index.retriever("bm25")
    assert index.retriever("bm25") is not index.retriever("bm25", k1=1.2)


def test_build_settings_are_checked_before_any_work(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", ROWS[:1])
    out = tmp_path / "never"
    with pytest.raises(ConfigError, match=r"unknown build setting color='red'"):
        sirerag.Index.build(corpus, out, color="red")
    with pytest.raises(ConfigError, match=r"\[tree\] levels must be an integer"):
        sirerag.Index.build(corpus, out, tree={"levels": "4"})
    with pytest.raises(ConfigError, match=r"trees must be a tuple of distinct values"):
        sirerag.Index.build(corpus, out, trees=["similarity", "forest"])
    with pytest.raises(ConfigError, match=r"trees must be a list of tree names such as \['similarity', "
                                          r"'relatedness'\] \(\[\] for the leaves alone\), got 'similarity'$"):
        sirerag.Index.build(corpus, out, trees="similarity")
    with pytest.raises(ConfigError, match=r"--embedder must be"):
        sirerag.Index.build(corpus, out, embedder="word2vec")
    assert not out.exists()


def test_build_config_shorthands_and_the_llm_extractor():
    config = build_config(trees=["similarity"], chunking="passage", graph=True, seed=7, tree={"levels": 2})
    assert (config.trees, config.chunking.mode, config.graph.enabled, config.seed, config.tree.levels) == \
        (("similarity",), "passage", True, 7, 2)
    assert build_config(trees=[]).trees == ()
    # --llm alone: every stage that takes an LLM uses it, proposition extraction included
    assert build_config(llm="openai:m@http://127.0.0.1:9/v1").extraction.extractor == "llm"
    assert build_config(llm="openai:m@http://127.0.0.1:9/v1", extractor="offline").extraction.extractor == "offline"
    assert build_config().extraction.extractor == "offline"
    assert BuildConfig().extraction.extractor == "auto" and BuildConfig().validate().extraction.extractor == "offline"
    base = BuildConfig(seed=3)
    assert build_config(base, trees=[]).seed == 3
    with pytest.raises(ConfigError, match="config must be a sirerag.core.config.BuildConfig"):
        build_config({"seed": 3})  # type: ignore[arg-type]


def test_add_remove_and_export_go_through_the_pipeline(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", ROWS[:2])
    with sirerag.Index.build(corpus, tmp_path / "index", trees=[]) as index:
        assert len(index) == 2
        report = index.add(write_corpus(tmp_path / "more.jsonl", ROWS[2:]))
        assert report.changed and report.counts["documents_added"] == 1 and len(index) == 3
        assert index.search("Botswana", k=1, retriever="bm25")[0].passages == ("okavango",)
        report = index.remove("elm", refresh_threshold=0.2, cache_dir=tmp_path / "cache")
        assert report.counts["documents_removed"] == 1
        assert [(h.command, h.refresh_threshold) for h in index.manifest.history] == [("add", 0.3), ("remove", 0.2)]
        with pytest.raises(TypeError, match="unexpected keyword argument 'refresh'"):
            index.remove("harwick", refresh=0.2)  # type: ignore[call-arg]
        assert sorted(d.id for d in index.documents()) == ["harwick", "okavango"]
        with pytest.raises(InputError, match="1 document id.s. not in the index: nope; nothing was changed"):
            index.remove(["nope"])
        exported = index.export(tmp_path / "export", format="jsonl")
        assert exported.rows == 2 and (tmp_path / "export" / "entries.jsonl").is_file()
        assert sirerag.Index.load(tmp_path / "index").search("bridge", k=1)[0].title == "Harwick Bridge"


class _Recorder:
    """A retriever over a fixed ranking that records whether it was closed."""

    name = "fixed"

    def __init__(self, ids):
        self.ids, self.closed = list(ids), 0

    def search(self, query, k=10):
        return self.search_many([query], k)[0]

    def search_many(self, queries, k=10):
        return [[Hit(i, 1.0 - n / 10) for n, i in enumerate(self.ids[:k])] for _ in queries]

    def close(self):
        self.closed += 1


def _full_pool() -> Pool:
    leaf = Node(id="l1", text="a passage", kind="leaf", tree="similarity", level=0, passages=("p1",))
    summary = Node(id="s1", text="a summary", kind="summary", tree="similarity", level=1, children=("l1",),
                   passages=("p1", "p2"))
    return Pool(entries=(leaf, summary), embeddings=np.eye(2, dtype=np.float32))


def test_retrievers_are_context_managers_that_close_what_they_wrap(index):
    with load_retriever("dense", index.loaded) as dense:  # the docs/export.md pattern
        assert dense.search("Harwick Bridge", k=1)[0].entry_id
    base = _Recorder(["s1", "l1"])
    with PoolRanker(base, _full_pool()) as ranked:
        assert [h.entry_id for h in ranked.search("q", k=2)] == ["l1", "s1"]  # the pool rule: the leaf first
        assert describe(ranked) == {"retriever": "fixed", "pool_rule": "passages", "leaf_share": 0.9,
                                    "lift_ratio": 0.0}
    assert base.closed == 1
    parts = [_Recorder(["l1"]), _Recorder(["s1"])]
    with FusionRetriever(parts) as fused:
        assert fused.search("q", k=2)
    assert [p.closed for p in parts] == [1, 1]
    assert describe(parts[0]) == {"retriever": "fixed", "pool_rule": "native", "leaf_share": None,
                                  "lift_ratio": None}


def test_closing_an_index_closes_its_retrievers(index, monkeypatch):
    with sirerag.Index.load(index.path) as again:
        retriever = again.retriever("bm25")
        closed = []
        monkeypatch.setattr(retriever, "close", lambda: closed.append(True), raising=False)
    assert closed == [True]

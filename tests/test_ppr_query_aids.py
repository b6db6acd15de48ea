"""What a PPR search needs at start, stored at build time (graph/seeds_bm25, surface.json, tagger.json): a
search with them ranks exactly as one that rebuilds them, loads without rebuilding any of them, falls back
for an index built without them, and an incremental add writes them again for the new pool."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sirerag.cli.main import main
from sirerag.core.errors import IndexFormatError
from sirerag.graph.facts import FactTable
from sirerag.pool.loaded import load_index

DATA = Path(__file__).resolve().parents[1] / "data"
QUESTIONS = [json.loads(line)["question"] for line in (DATA / "questions.jsonl").read_text().splitlines()[:12]]


def _corpus(path: Path, start: int, n: int) -> Path:
    lines = (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[start:start + n]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def graph_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("aids")
    out = root / "index"
    assert main(["build", str(_corpus(root / "c.jsonl", 0, 60)), "--out", str(out), "--chunking", "passage",
                 "--graph", "--quiet"]) == 0
    return out


def _hits(index, **options):
    from sirerag.retrievers import load_retriever

    retriever = load_retriever("ppr", index, **options)
    return [[(h.entry_id, round(h.score, 9)) for h in hits] for hits in retriever.search_many(QUESTIONS, k=10)]


def _forget_aids(monkeypatch):
    """Make the loader see an index built before the aids were stored."""
    import sirerag.graph.store as store

    load = store.load_graph

    def without_aids(folder, **kwargs):
        graph, meta = load(folder, **kwargs)
        return graph, replace(meta, query_aids={})

    monkeypatch.setattr(store, "load_graph", without_aids)


def _use_no_aid(monkeypatch):
    """Make the loader use none of the stored aids, as for a pool they were not stored for: each is computed."""
    import sirerag.retrievers.ppr_aids as aids

    for name in ("load_pool_nodes", "load_seeds_bm25", "load_surface_forms", "load_tagger_counts"):
        monkeypatch.setattr(aids, name, lambda *args, **kwargs: None)


def test_the_build_stores_the_aids_and_a_search_ranks_as_without_them(graph_index, monkeypatch):
    meta = json.loads((graph_index / "graph" / "graph.json").read_text())
    assert set(meta["query_aids"]) == {"seeds_bm25", "surface", "tagger", "fact_rows", "pool_nodes"}
    assert (graph_index / "graph" / "seeds_bm25" / "tokenizer.json").is_file()
    index = load_index(graph_index)
    stored = _hits(index)
    _use_no_aid(monkeypatch)
    assert _hits(index) == stored  # rebuilt in memory: the same ranking, to the score


def test_a_search_with_the_aids_rebuilds_none_of_them(graph_index, monkeypatch):
    import sirerag.extraction.tagger as tagger
    import sirerag.graph.surface as surface
    import sirerag.pool.bm25 as lexical
    from sirerag.retrievers import load_retriever

    def refuse(*_, **__):
        raise AssertionError("rebuilt at search time")

    monkeypatch.setattr(lexical, "build_lexical_index", refuse)
    monkeypatch.setattr(surface, "surface_forms", refuse)
    monkeypatch.setattr(tagger.EntityTagger, "fit", refuse)
    for module in ("sirerag.retrievers.ppr", "sirerag.retrievers.ppr_aids"):  # the pool's nodes: stored
        monkeypatch.setattr(f"{module}.seed_rows", refuse)
    monkeypatch.setattr("sirerag.graph.entries.entry_node_pairs", refuse)
    index = load_index(graph_index)
    monkeypatch.setattr(type(index), "propositions", refuse)  # bridging takes its rows by the stored fact rows
    retriever = load_retriever("ppr", index)
    assert retriever.bridge is not None and retriever.bridge_settings.hops > 0
    assert isinstance(retriever.graph.facts, FactTable)  # no fact parsed until one is shown
    assert len(_hits(index)) == len(QUESTIONS)


def test_fact_rows_are_used_only_for_the_propositions_they_were_stored_for(graph_index):
    import numpy as np

    from sirerag.graph.query_aids import load_fact_rows
    from sirerag.graph.store import load_graph
    from sirerag.trees.proposition_vectors import load_proposition_vectors

    index = load_index(graph_index)
    graph, meta = load_graph(graph_index / "graph", facts=True)
    aids, props = meta.query_aids, index.propositions()
    sha, vectors = index.manifest.files["propositions.jsonl"].sha256, load_proposition_vectors(graph_index, len(props))
    rows = load_fact_rows(graph_index / "graph", aids, facts=len(graph.facts), propositions_sha256=sha,
                          vectors=len(props))
    position = {p.id: i for i, p in enumerate(props)}
    assert rows is not None and rows.tolist() == [position[f.id] for f in graph.facts]
    assert np.array_equal(vectors[rows], vectors[[position[f.id] for f in graph.facts]])
    for wrong in ({"propositions_sha256": "0" * 64}, {"facts": len(graph.facts) + 1}, {"vectors": 1}):
        given = {"facts": len(graph.facts), "propositions_sha256": sha, "vectors": len(props), **wrong}
        assert load_fact_rows(graph_index / "graph", aids, **given) is None


def test_the_pools_nodes_are_used_only_for_the_entries_they_were_stored_for(graph_index):
    from sirerag.graph.entries import entry_node_pairs
    from sirerag.graph.query_aids import load_pool_nodes, seed_rows
    from sirerag.graph.store import load_graph

    index = load_index(graph_index)
    graph, meta = load_graph(graph_index / "graph", facts=False)
    sha = index.manifest.files["entries.jsonl"].sha256
    given = {"entries": len(index.pool), "entries_sha256": sha, "nodes": graph.n_nodes}
    pairs, (rows, nodes) = load_pool_nodes(graph_index / "graph", meta.query_aids, **given)
    assert pairs.tolist() == entry_node_pairs(index.pool, graph.passage_index).tolist() and pairs.shape[1] > len(rows)
    assert [rows.tolist(), nodes.tolist()] == [a.tolist() for a in seed_rows(index.pool, graph.passage_index)]
    for wrong in ({"entries_sha256": "0" * 64}, {"entries": len(index.pool) + 1}, {"nodes": 3}):
        assert load_pool_nodes(graph_index / "graph", meta.query_aids, **{**given, **wrong}) is None


def test_an_index_without_aids_is_refused_with_one_line_to_rebuild(graph_index, monkeypatch):
    _forget_aids(monkeypatch)
    with pytest.raises(IndexFormatError, match=r"was built by an older sirerag \(no stored query aid seeds_bm25; no "
                                               r"stored query aid pool_nodes; no stored query aid surface; no stored "
                                               r"query aid tagger\): rebuild it with sirerag \S+ \(sirerag build "):
        _hits(load_index(graph_index))


@pytest.mark.slow
def test_an_add_writes_the_aids_for_the_new_pool(graph_index, tmp_path, monkeypatch):
    import shutil

    index_dir = tmp_path / "index"
    shutil.copytree(graph_index, index_dir)
    assert main(["add", str(index_dir), str(_corpus(tmp_path / "more.jsonl", 60, 10)), "--quiet"]) == 0
    index = load_index(index_dir)
    meta = json.loads((index_dir / "graph" / "graph.json").read_text())
    assert meta["query_aids"]["seeds_bm25"]["documents"] == 70
    facts = sum(1 for _ in (index_dir / "graph" / "facts.jsonl").open())
    assert meta["query_aids"]["fact_rows"]["facts"] == facts
    assert meta["query_aids"]["pool_nodes"]["entries"] == len(index.pool)
    stored = _hits(index)
    _use_no_aid(monkeypatch)
    assert _hits(index) == stored


def test_graph_files_read_in_one_parse_as_line_by_line_and_a_damaged_line_is_named(graph_index, tmp_path):
    import shutil

    from sirerag.core.errors import IndexFormatError
    from sirerag.core.io import read_jsonl
    from sirerag.graph.store import _rows, load_graph

    for name in ("nodes.jsonl", "facts.jsonl"):
        assert _rows(graph_index / "graph" / name) == list(read_jsonl(graph_index / "graph" / name))
    folder = tmp_path / "graph"
    shutil.copytree(graph_index / "graph", folder)
    (folder / "node_names.json").unlink()  # a graph saved before it: nodes.jsonl is read
    lines = (folder / "nodes.jsonl").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2] + ' {"kind": "entity"}'  # two values on one line: one parse would accept it as two rows
    (folder / "nodes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(IndexFormatError, match=r"nodes\.jsonl:3: invalid JSON"):
        load_graph(folder)


def test_the_seed_index_is_matched_by_the_entries_file_s_sha256_without_hashing_the_ids(graph_index, monkeypatch):
    import sirerag.graph.query_aids as query_aids
    from sirerag.graph.query_aids import load_pool_nodes, load_seeds_bm25
    from sirerag.graph.store import load_graph

    index = load_index(graph_index)
    graph, meta = load_graph(graph_index / "graph", facts=False)
    sha = index.manifest.files["entries.jsonl"].sha256
    _, (rows, _) = load_pool_nodes(graph_index / "graph", meta.query_aids, entries=len(index.pool),
                                   entries_sha256=sha, nodes=graph.n_nodes)
    record = meta.query_aids["seeds_bm25"]
    assert record["entries_sha256"] == sha and record["entries"] == len(index.pool)
    hashed = []
    real = query_aids.rows_key
    monkeypatch.setattr(query_aids, "rows_key", lambda pool, r: hashed.append(len(r)) or real(pool, r))
    assert load_seeds_bm25(graph_index / "graph", meta.query_aids, index.pool, rows, entries_sha256=sha) is not None
    assert hashed == []  # the file's checksum said it: no id hashed
    # another file: the ids at the rows decide, and they are this pool's
    assert load_seeds_bm25(graph_index / "graph", meta.query_aids, index.pool, rows, entries_sha256="0" * 64)
    assert hashed == [len(rows)]
    moved = {**meta.query_aids, "seeds_bm25": {**record, "rows": "0" * 64}}  # and ids that are not these rows'
    assert load_seeds_bm25(graph_index / "graph", moved, index.pool, rows, entries_sha256="0" * 64) is None
    assert load_seeds_bm25(graph_index / "graph", meta.query_aids, index.pool, rows[:-1], entries_sha256=sha) is None


def test_a_passage_s_leaves_come_from_the_graph_without_reading_every_leaf(graph_index, monkeypatch):
    """The pool rule's lifts ask for a passage's leaves: ppr answers from its entry-node matrix exactly what the
    pool's scan of every leaf gives, and a search with lifts then ranks as before without that scan."""
    from sirerag.graph.entries import PassageLeaves
    from sirerag.pool.entries import LazyEntries
    from sirerag.retrievers import load_retriever

    index = load_index(graph_index)
    retriever = load_retriever("ppr", index, lift_ratio=1.0)  # a lift wherever an entry is held back
    leaves_of = retriever.passage_leaves
    scanned = {p: tuple(n.id for n in index.pool.leaves_of(p)) for p in retriever.graph.passages}
    assert {p: tuple(n.id for n in leaves_of(p)) for p in scanned} == scanned
    assert leaves_of("not a passage of this index") == ()  # asked of the pool, which has none
    expected = _hits(index, lift_ratio=1.0)
    fresh = load_index(graph_index)

    def refuse(self):
        raise AssertionError("every leaf's passages were read")

    asked = []
    answer = PassageLeaves.__call__
    monkeypatch.setattr(LazyEntries, "leaf_passages", refuse)
    monkeypatch.setattr(PassageLeaves, "__call__", lambda self, passage: asked.append(passage) or answer(self, passage))
    assert _hits(fresh, lift_ratio=1.0) == expected
    assert asked  # the searches did lift

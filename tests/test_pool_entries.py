"""A saved pool's entries parsed when first used (sirerag/pool/entries.py): the sequence behaves as the tuple
it stands for, reads ids, kinds and leaf passages without parsing, names the line of a damaged entry, and a
search parses only the entries it returns or inspects."""
from __future__ import annotations

import json

import numpy as np
import orjson
import pytest

from sirerag.core.config.retrieval import PPR_POOL
from sirerag.core.errors import IndexFormatError
from sirerag.core.types import Node, Pool
from sirerag.pool.entries import LazyEntries
from sirerag.pool.store import ENTRIES, load_pool, save_pool
from sirerag.retrievers.base import Hit
from sirerag.retrievers.pool_rank import PoolRanker, has_non_leaves


def _entries(n_passages: int = 40) -> tuple[Node, ...]:
    leaves = [Node(id=f"l{i}", text=f"passage {i} says \"quoted\", \"kind\": \"summary\"\n", kind="leaf",
                   tree="similarity", level=0, passages=(f"p{i}",)) for i in range(n_passages)]
    summaries = [Node(id=f"s{i}", text=f"summary {i}", kind="summary", tree="similarity", level=1,
                      children=(f"l{i}", f"l{i + 1}"), passages=(f"p{i}", f"p{i + 1}"))
                 for i in range(0, n_passages - 1, 2)]
    aggregates = [Node(id=f"a{i}", text=f"aggregate {i}", kind="aggregate", tree="relatedness", level=0,
                       passages=(f"p{i}", f"p{i + 3}"), entity=f"e{i}", propositions=(f"f{i}",))
                  for i in range(0, n_passages - 3, 3)]
    return tuple(leaves + summaries + aggregates)


def _saved(tmp_path, entries=None):
    entries = _entries() if entries is None else entries
    rng = np.random.default_rng(0)
    save_pool(tmp_path, Pool(entries=entries, embeddings=rng.normal(size=(len(entries), 4)).astype(np.float32)))
    return entries


def test_lazy_entries_behave_as_the_tuple(tmp_path):
    entries = _saved(tmp_path)
    pool = load_pool(tmp_path)
    lazy = pool.entries
    assert isinstance(lazy, LazyEntries) and lazy.parsed == 0
    assert len(lazy) == len(entries) and pool.ids == [e.id for e in entries]
    assert pool.kinds == [e.kind for e in entries] and lazy.parsed == 0
    order = np.random.default_rng(1).permutation(len(entries))
    assert [lazy[int(i)] for i in order] == [entries[int(i)] for i in order]
    assert lazy[-1] == entries[-1] and lazy[2:5] == entries[2:5]
    with pytest.raises(IndexError, match="range"):
        lazy[len(entries)]
    assert list(lazy) == list(entries) and lazy == entries
    assert pool.position("a3") == entries.index(pool.get("a3"))


def test_leaf_passages_are_read_without_parsing(tmp_path):
    entries = _saved(tmp_path)
    pool, eager = load_pool(tmp_path), Pool(entries=entries, embeddings=np.zeros((len(entries), 4), np.float32))
    assert has_non_leaves(pool)
    assert pool.entries.leaf_passages() == {i: e.passages for i, e in enumerate(entries) if e.kind == "leaf"}
    assert pool.entries.parsed == 0
    assert pool.leaves_of("p7") == eager.leaves_of("p7") == (entries[7],)
    assert pool.entries.parsed == 1


def test_leaf_passages_of_leaves_in_several_runs(tmp_path):
    entries = _entries(12)
    leaves = [e for e in entries if e.kind == "leaf"]
    others = [e for e in entries if e.kind != "leaf"]
    mixed = (others[0], *leaves[:4], others[1], others[-1], *leaves[4:9], others[2], *leaves[9:])  # three runs
    _saved(tmp_path, mixed)
    pool = load_pool(tmp_path)
    assert pool.entries.leaf_passages() == {i: e.passages for i, e in enumerate(mixed) if e.kind == "leaf"}
    assert pool.entries.parsed == 0


def test_lines_of_another_layout_are_parsed_at_load(tmp_path):
    entries = _saved(tmp_path)
    lines = (tmp_path / ENTRIES).read_bytes().split(b"\n")
    lines[3] = orjson.dumps(dict(reversed(list(json.loads(lines[3]).items()))))  # other key order, no spaces
    (tmp_path / ENTRIES).write_bytes(b"\n".join(lines[:5] + [b"", b"  "] + lines[5:]))  # and two blank lines
    pool = load_pool(tmp_path)
    assert pool.entries.parsed == 1 and pool.ids == [e.id for e in entries] and pool.entries == entries


def test_a_damaged_line_is_named_when_the_entry_is_read(tmp_path):
    _saved(tmp_path)
    lines = (tmp_path / ENTRIES).read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"propositions": []}', b'"propositions": [}')
    (tmp_path / ENTRIES).write_bytes(b"\n".join(lines))
    pool = load_pool(tmp_path)  # its id and kind are readable: found when it is used
    assert pool.entries[1].id == "l1"
    with pytest.raises(IndexFormatError, match=r"entries\.jsonl:3: damaged line"):
        pool.entries[2]


@pytest.mark.parametrize("damage, message", [
    ((b'"kind": "leaf"', b'"kind": "leef"'), r"entries\.jsonl:4: not a pool entry \(Node\.kind must be one of"),
    ((b', "kind": "leaf"', b''), r"entries\.jsonl:4: not a pool entry"),
    ((b'[]}', b'[]} {"id": "x", "text": "y"}'), r"entries\.jsonl:4: damaged line"),  # two records
])
def test_a_line_the_scan_cannot_read_is_named_at_load(tmp_path, damage, message):
    _saved(tmp_path)
    lines = (tmp_path / ENTRIES).read_bytes().split(b"\n")
    lines[3] = lines[3].replace(*damage)
    (tmp_path / ENTRIES).write_bytes(b"\n".join(lines))
    with pytest.raises(IndexFormatError, match=message):
        load_pool(tmp_path)


class _Ranking:
    """A retriever that ranks every entry of the pool by a fixed random score."""

    name = "fixed"

    def __init__(self, pool: Pool) -> None:
        self.ids, self.scores = pool.ids, np.random.default_rng(2).random(len(pool))

    def search_many(self, queries, k=10):
        order = np.argsort(-self.scores)[:k]
        return [[Hit(self.ids[i], float(self.scores[i])) for i in order] for _ in queries]


def test_a_ranked_search_parses_a_bounded_number_of_entries(tmp_path):
    _saved(tmp_path, _entries(n_passages=3000))
    pool = load_pool(tmp_path)
    ranker = PoolRanker(_Ranking(pool), pool, PPR_POOL)  # the default retriever's rule, with its lift
    hits = ranker.search_many(["q"], k=5)[0]
    assert len(hits) == 5 and len(pool) == 5499
    assert pool.entries.parsed <= 2 * PPR_POOL.pool_depth


@pytest.mark.slow
@pytest.mark.parametrize("retriever", ["dense", "bm25"])
def test_a_search_of_a_built_index_parses_only_what_it_returns(data_leaves, retriever):
    import sirerag

    with sirerag.Index.load(data_leaves[0]) as index:
        results = index.search("Which river flows through the capital?", k=5, retriever=retriever)
        assert len(results) == 5 and len(index.pool) == 300
        assert index.pool.entries.parsed <= 5

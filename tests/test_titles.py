"""Titles of summaries: a summary's most central children's titles, derived when a result is shown."""
from __future__ import annotations

import numpy as np

from sirerag.core.types import Document, Node, Pool
from sirerag.pool.titles import entry_title, entry_titles
from sirerag.retrievers.base import Hit

DOCS = {f"d{i}": Document(id=f"d{i}", title=t, text="x") for i, t in
        enumerate(["Ada Lovelace", "Charles Babbage", "Analytical Engine", "London", "Ada Lovelace"])}


def leaf(i: int) -> Node:
    return Node(id=f"l{i}", text=f"leaf {i}", kind="leaf", tree="similarity", level=0, passages=(f"d{i}",))


def pool_of(entries: list[Node], rows: list[list[float]]) -> Pool:
    return Pool(entries=tuple(entries), embeddings=np.asarray(rows, dtype=np.float32))


def test_a_summary_is_titled_by_its_children_nearest_their_centroid():
    leaves = [leaf(i) for i in range(5)]
    summary = Node(id="s", text="sum", kind="summary", tree="similarity", level=1,
                   children=("l0", "l1", "l2", "l3", "l4"), passages=tuple(DOCS))
    # l3 sits at the centre of the five; l0 and l4 (both "Ada Lovelace") next; l1 and l2 at the edges
    rows = [[1, 1, 0], [1, 0, 0], [0, 0, 1], [0.7, 0.5, 0.3], [1, 0.9, 0.2], [1, 1, 1]]
    pool = pool_of(leaves + [summary], rows)
    assert entry_titles(pool, summary, DOCS) == ("London", "Ada Lovelace", "Charles Babbage")
    assert entry_title(pool, summary, DOCS) == "London; Ada Lovelace; Charles Babbage"
    assert entry_title(pool, leaves[2], DOCS) == "Analytical Engine"


def test_higher_summaries_and_relatedness_summaries_take_their_childrens_first_titles():
    leaves = [leaf(i) for i in range(4)]
    low = [Node(id=f"s{j}", text=f"s{j}", kind="summary", tree="similarity", level=1,
                children=(f"l{2 * j}", f"l{2 * j + 1}")) for j in range(2)]
    top = Node(id="t", text="t", kind="summary", tree="similarity", level=2, children=("s0", "s1"))
    aggs = [Node(id=f"a{e}", text=e, kind="aggregate", tree="relatedness", level=0, entity=e)
            for e in ("babbage", "london")]
    rel = Node(id="r", text="r", kind="summary", tree="relatedness", level=1, children=("ababbage", "alondon", "gone"))
    rows = [[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [1, 0.1], [0.2, 1], [1, 1], [1, 0.2], [0.1, 1], [1, 1]]
    pool = pool_of(leaves + low + [top] + aggs + [rel], rows)
    assert entry_title(pool, low[0], DOCS) == "Ada Lovelace; Charles Babbage"
    assert entry_title(pool, top, DOCS) == "Ada Lovelace; Analytical Engine"  # a tie keeps the children's order
    assert entry_title(pool, aggs[1], DOCS) == "london"
    assert entry_title(pool, rel, DOCS) == "babbage; london"  # a child missing from the pool is skipped
    bare = Node(id="b", text="b", kind="summary", tree="similarity", level=1, children=("nowhere",))
    assert entry_title(pool_of([bare], [[1, 0]]), bare, DOCS) == ""


def test_search_results_and_framework_metadata_carry_summary_titles(tmp_path):
    import sirerag
    from sirerag.integrations import metadata
    from _report_index import make_index

    index = sirerag.Index.load(make_index(tmp_path / "index"))
    by_id = {e.id: e for e in index.pool.entries}
    before = [e.to_dict() for e in index.pool.entries]
    results = {i: index._result(Hit(i, 1.0)) for i in ("s10", "s2", "a-London", "r1")}
    assert results["s10"].title == "Ada Lovelace; Charles Babbage"
    assert results["s2"].title == "Ada Lovelace; Charles Babbage"  # its children's first titles, repeats dropped
    assert results["a-London"].title == "London" and results["r1"].title == "Charles Babbage; London"
    assert metadata(results["s2"], index)["title"] == "Ada Lovelace; Charles Babbage"
    # nothing a retriever reads changed: the entries (their text) and their vectors are as loaded
    assert [e.to_dict() for e in index.pool.entries] == before and all("title" not in e for e in before)
    assert by_id["s2"].text.startswith("Top summary.")

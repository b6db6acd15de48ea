"""The graph's facts as a search reads them: which entities and passage each fact has, from arrays, and a fact's
id and text parsed from ``facts.jsonl`` only when asked for.

A search bridges through every fact of the graph (22,619 on the 2Wiki index) but shows the text of a few. Parsing
``facts.jsonl`` and making a :class:`~sirerag.graph.build.GraphFact` of each line cost about 0.1 s of a one-shot
search, so the graph also stores, beside that file (nothing pickled)::

    graph/fact_entity_indptr.npy   (facts + 1,) int64: fact i's entity nodes are nodes[indptr[i]:indptr[i + 1]]
    graph/fact_entity_nodes.npy    its entity nodes, each once, in the order the fact names them
    graph/fact_passage_nodes.npy   (facts,) int64: the passage node of each fact (-1: not a graph passage)

and :class:`FactTable` serves the facts from them; a graph saved without them is read whole, as before.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Iterator, Sequence, overload

import numpy as np
import scipy.sparse as sp

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import load_npy, save_npy
from sirerag.core.io.files import loads_index_json
from sirerag.graph.build import GraphFact

FACT_ARRAYS = ("fact_entity_indptr.npy", "fact_entity_nodes.npy", "fact_passage_nodes.npy")


def fact_arrays(facts: Sequence[GraphFact], passage_index: dict[str, int]) -> tuple[np.ndarray, ...]:
    """``(indptr, entity nodes, passage nodes)`` of ``facts`` (each fact's entities once, in order)."""
    named = [list(dict.fromkeys(f.entities)) for f in facts]
    indptr = np.zeros(len(facts) + 1, dtype=np.int64)
    np.cumsum([len(n) for n in named], out=indptr[1:])
    nodes = np.fromiter((e for n in named for e in n), dtype=np.int64, count=int(indptr[-1]))
    passages = np.fromiter((passage_index.get(f.passage, -1) for f in facts), dtype=np.int64, count=len(facts))
    return indptr, nodes, passages


def save_fact_arrays(directory: Path, facts: Sequence[GraphFact], passage_index: dict[str, int]) -> None:
    for name, array in zip(FACT_ARRAYS, fact_arrays(facts, passage_index)):
        save_npy(directory / name, array)


class FactTable(Sequence[GraphFact]):
    """The facts of a saved graph: entities and passages from the stored arrays, the rest parsed from the bytes
    of ``facts.jsonl`` (read when the table is opened) when a fact is asked for."""

    def __init__(self, path: Path, raw: bytes, indptr: np.ndarray, nodes: np.ndarray, passage_nodes: np.ndarray,
                 passages: Sequence[str], n_entities: int) -> None:
        self.path, self._raw, self.indptr, self.nodes, self.passage_nodes = path, raw, indptr, nodes, passage_nodes
        self._passages, self._n_entities = passages, n_entities

    @classmethod
    def open(cls, directory: Path, facts_file: Path, passages: Sequence[str], n_entities: int) -> "FactTable | None":
        """The table of a graph directory, or None when it has no fact arrays (saved before them).

        Raises:
            IndexFormatError: the arrays do not describe the graph's facts and nodes."""
        if not all((directory / name).is_file() for name in FACT_ARRAYS):
            return None
        indptr, nodes, passage_nodes = (np.asarray(load_npy(directory / name)) for name in FACT_ARRAYS)
        n = len(passage_nodes)
        if indptr.shape != (n + 1,) or int(indptr[0]) != 0 or int(indptr[-1]) != len(nodes) \
                or np.any(np.diff(indptr) < 0) or (nodes.size and (nodes.min() < 0 or nodes.max() >= n_entities)) \
                or (n and (np.any((passage_nodes < n_entities) & (passage_nodes != -1))
                           or passage_nodes.max() >= n_entities + len(passages))):
            raise IndexFormatError(f"{directory}: the fact arrays ({', '.join(FACT_ARRAYS)}) do not describe "
                                   f"{n} facts over {n_entities} entities and {len(passages)} passages")
        # the file's bytes now, not at the first fact asked for: the facts of the commit being read
        return cls(facts_file, facts_file.read_bytes(), indptr, nodes, passage_nodes, passages, n_entities)

    def __len__(self) -> int:
        return len(self.passage_nodes)

    @cached_property
    def passage_nodes_by_id(self) -> dict[str, int]:
        """Passage id -> its node (the values of :attr:`passage_nodes`)."""
        return {pid: self._n_entities + i for i, pid in enumerate(self._passages)}

    @cached_property
    def _lines(self) -> tuple[bytes, np.ndarray]:
        raw = self._raw
        ends = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == ord("\n"))
        starts, stops = np.concatenate([[0], ends + 1]), np.append(ends, len(raw))
        keep = stops > starts  # the file ends with a newline: its last "line" is empty
        if int(keep.sum()) != len(self):
            raise IndexFormatError(f"{self.path}: {int(keep.sum())} facts, the fact arrays beside it describe "
                                   f"{len(self)}")
        return raw, np.stack([starts[keep], stops[keep]], axis=1)

    def _fact(self, i: int) -> GraphFact:
        raw, bounds = self._lines
        start, stop = bounds[i]
        row = loads_index_json(raw[start:stop])
        try:
            return GraphFact(id=row["id"], text=row["text"], passage=row["passage"], entities=tuple(row["entities"]))
        except (KeyError, TypeError) as exc:
            raise IndexFormatError(f"{self.path}: line {i + 1} is not a graph fact ({exc})") from exc

    @overload
    def __getitem__(self, i: int) -> GraphFact: ...

    @overload
    def __getitem__(self, i: slice) -> list[GraphFact]: ...

    def __getitem__(self, i: int | slice) -> GraphFact | list[GraphFact]:
        if isinstance(i, slice):
            return [self._fact(j) for j in range(*i.indices(len(self)))]
        j = int(i) + len(self) if int(i) < 0 else int(i)
        if not 0 <= j < len(self):
            raise IndexError(f"fact {i} of {len(self)}")
        return self._fact(j)

    def __iter__(self) -> Iterator[GraphFact]:
        return (self._fact(i) for i in range(len(self)))

    def __repr__(self) -> str:
        return f"FactTable({len(self)} facts, {str(self.path)!r})"


def title_facts(fact_passage: np.ndarray, passage_key: dict[str, int], titles: Sequence[tuple[int, str]],
                 entity_facts: sp.csr_matrix) -> tuple[sp.csr_matrix | None, sp.csr_matrix | None]:
    """``(title node x fact, fact x title node)`` incidence of the facts of the passages each title node titles,
    without the facts that name their title already; ``(None, None)`` when there are none. ``fact_passage``: a
    key of each fact's passage; ``passage_key``: passage id -> that key."""
    if not len(titles) or not len(fact_passage):
        return None, None
    keys, fact_position = np.unique(fact_passage, return_inverse=True)  # the facts' passages, 0 .. len(keys) - 1
    title_entity = np.fromiter((int(e) for e, _ in titles), np.int64, count=len(titles))
    title_key = np.fromiter((passage_key.get(p, -1) for _, p in titles), np.int64, count=len(titles))
    title_passage = np.minimum(np.searchsorted(keys, title_key), len(keys) - 1)
    keep = (keys[title_passage] == title_key) & (title_key >= 0)  # titles of passages that have facts
    # passage -> its facts (CSR over passage positions), then every (title node, fact of its passage)
    order = np.argsort(fact_position, kind="stable")
    bounds = np.searchsorted(fact_position[order], np.arange(len(keys) + 1))
    starts, stops = bounds[title_passage[keep]], bounds[title_passage[keep] + 1]
    entity = np.repeat(title_entity[keep], stops - starts)
    fact = order[np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)] or [np.zeros(0, np.int64)])]
    pairs = sp.csr_matrix((np.ones(entity.size, np.float32), (entity, fact)), shape=entity_facts.shape)
    pairs.sum_duplicates()
    pairs = pairs - pairs.multiply(entity_facts > 0)  # a fact that names its title already needs no title edge
    pairs.eliminate_zeros()
    if not pairs.nnz:
        return None, None
    pairs.data[:] = 1.0
    return pairs.tocsr(), pairs.T.tocsr()

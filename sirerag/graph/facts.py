"""The graph's facts as a search reads them: which entities and passage each fact has, from arrays, and a fact's
id and text parsed from ``facts.jsonl`` only when asked for.

A search bridges through every fact of the graph (22,619 on the 2Wiki index) but shows the text of a few. Parsing
``facts.jsonl`` and making a :class:`~sirerag.graph.build.GraphFact` of each line cost about 0.1 s of a one-shot
search, so the graph also stores, beside that file (nothing pickled)::

    graph/fact_entity_indptr.npy   (facts + 1,) int64: fact i's entity nodes are nodes[indptr[i]:indptr[i + 1]]
    graph/fact_entity_nodes.npy    its entity nodes, each once, in the order the fact names them
    graph/fact_passage_nodes.npy   (facts,) int64: the passage node of each fact (-1: not a graph passage)

    graph/fact_lines.npy           (facts, 2) int64: the byte offsets of each fact's line in facts.jsonl (start, end)

and :class:`FactTable` serves the facts from them, with ``facts.jsonl`` memory-mapped; a graph saved without the
first three is read whole, as before, and one saved without the line offsets finds its lines by a scan of the
file when a fact is first asked for.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Iterator, Sequence, overload

import numpy as np

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import load_npy, save_npy
from sirerag.core.io.files import loads_index_json
from sirerag.graph.build import GraphFact
from sirerag.pool.entries import map_file
from sirerag.pool.entry_table import line_offsets

FACT_ARRAYS = ("fact_entity_indptr.npy", "fact_entity_nodes.npy", "fact_passage_nodes.npy")
FACT_LINES = "fact_lines.npy"


def fact_arrays(facts: Sequence[GraphFact], passage_index: dict[str, int]) -> tuple[np.ndarray, ...]:
    """``(indptr, entity nodes, passage nodes)`` of ``facts`` (each fact's entities once, in order)."""
    named = [list(dict.fromkeys(f.entities)) for f in facts]
    indptr = np.zeros(len(facts) + 1, dtype=np.int64)
    np.cumsum([len(n) for n in named], out=indptr[1:])
    nodes = np.fromiter((e for n in named for e in n), dtype=np.int64, count=int(indptr[-1]))
    passages = np.fromiter((passage_index.get(f.passage, -1) for f in facts), dtype=np.int64, count=len(facts))
    return indptr, nodes, passages


def save_fact_arrays(directory: Path, facts: Sequence[GraphFact], passage_index: dict[str, int],
                     facts_file: Path | None = None) -> None:
    """Write the fact arrays into ``directory``; with ``facts_file`` (the ``facts.jsonl`` just written, one fact
    a line) also the byte offsets of its lines."""
    for name, array in zip(FACT_ARRAYS, fact_arrays(facts, passage_index)):
        save_npy(directory / name, array)
    if facts_file is not None:
        starts, ends, _ = line_offsets(facts_file.read_bytes())
        if len(starts) != len(facts):
            raise ValueError(f"{facts_file}: {len(starts)} lines for {len(facts)} facts")
        save_npy(directory / FACT_LINES, np.stack([starts, ends], axis=1) if len(starts) else
                 np.zeros((0, 2), np.int64))


class FactTable(Sequence[GraphFact]):
    """The facts of a saved graph: entities and passages from the stored arrays, the rest parsed from the bytes
    of ``facts.jsonl`` (mapped when the table is opened) when a fact is asked for. ``lines``: the stored offsets
    of its lines (None: found by a scan of the file when a fact is first asked for)."""

    def __init__(self, path: Path, raw: bytes, indptr: np.ndarray, nodes: np.ndarray, passage_nodes: np.ndarray,
                 passages: Sequence[str], n_entities: int, lines: np.ndarray | None = None) -> None:
        self.path, self._raw, self.indptr, self.nodes, self.passage_nodes = path, raw, indptr, nodes, passage_nodes
        self._passages, self._n_entities, self._stored_lines = passages, n_entities, lines

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
        # the file mapped now, not at the first fact asked for: the facts of the commit being read (an index's
        # files are replaced by a rename, never rewritten in place)
        raw = map_file(facts_file)
        lines = None
        if (directory / FACT_LINES).is_file():
            lines = np.asarray(load_npy(directory / FACT_LINES))
            if lines.dtype != np.int64 or lines.shape != (n, 2) or (n and (
                    int(lines[0, 0]) < 0 or np.any(lines[:, 1] < lines[:, 0])
                    or np.any(lines[1:, 0] <= lines[:-1, 1]))):
                raise IndexFormatError(f"{directory / FACT_LINES}: does not give the lines of {n} facts")
            if n and int(lines[-1, 1]) > len(raw):
                raise IndexFormatError(f"{facts_file}: {len(raw)} bytes, shorter than the lines of its {n} facts "
                                       f"({int(lines[-1, 1])} bytes; {FACT_LINES} beside it)")
        return cls(facts_file, raw, indptr, nodes, passage_nodes, passages, n_entities, lines)

    def __len__(self) -> int:
        return len(self.passage_nodes)

    @cached_property
    def passage_nodes_by_id(self) -> dict[str, int]:
        """Passage id -> its node (the values of :attr:`passage_nodes`)."""
        return {pid: self._n_entities + i for i, pid in enumerate(self._passages)}

    @cached_property
    def _lines(self) -> tuple[bytes, np.ndarray]:
        raw = self._raw
        if self._stored_lines is not None:
            return raw, self._stored_lines
        starts, stops, _ = line_offsets(raw)  # a graph saved before the stored offsets: one scan
        if len(starts) != len(self):
            raise IndexFormatError(f"{self.path}: {len(starts)} facts, the fact arrays beside it describe {len(self)}")
        return raw, np.stack([starts, stops], axis=1)

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

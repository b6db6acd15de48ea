"""The entity graph of an index as compact lists for the report page.

The stored adjacency adds up the weights of every edge kind between two nodes,
so the kinds are recovered here: entity-passage edges are *contains* edges;
between two entities, the co-occurrence weight is recounted from the facts and
whatever weight is left over is a *synonym* edge (cosine similarity).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import scipy.sparse as sp

from sirerag.graph.store import load_graph

logger = logging.getLogger(__name__)

#: edge kind codes used by the page (report.js has the same table)
CONTAINS, COOCCURRENCE, SYNONYM, BOTH = 0, 1, 2, 3
EDGE_KINDS = {CONTAINS: "contains", COOCCURRENCE: "co-occurrence", SYNONYM: "synonym",
              BOTH: "co-occurrence + synonym"}


def graph_json(directory: str | Path, doc_index: dict[str, int]) -> dict[str, Any]:
    """Read ``directory`` (an index's ``graph/``) into
    ``{"entities": [name...], "passages": [document position...], "edges": [i, j, weight, kind, ...]}``
    (four numbers per edge in one flat list; whole weights as integers).

    Node ``i`` is entity ``i`` when ``i < len(entities)``, else passage ``i - len(entities)``;
    each undirected edge is listed once with ``i < j``.
    """
    start = time.perf_counter()
    graph, _ = load_graph(directory)
    n_ent = graph.n_entities
    upper = sp.triu(graph.adjacency, k=1).tocoo()
    rows, cols, weights = upper.row, upper.col, upper.data
    cooc: dict[tuple[int, int], int] = {}
    for fact in graph.facts:
        nodes = sorted(set(fact.entities))
        for a in range(len(nodes)):
            for b in range(a + 1, len(nodes)):
                cooc[(nodes[a], nodes[b])] = cooc.get((nodes[a], nodes[b]), 0) + 1
    edges: list[int | float] = []
    counts = [0, 0, 0, 0]
    for i, j, w in zip(rows.tolist(), cols.tolist(), weights.tolist()):
        if j >= n_ent:
            kind = CONTAINS
        else:
            c = cooc.get((i, j), 0)
            rest = w - c
            kind = BOTH if c and rest > 1e-6 else COOCCURRENCE if c else SYNONYM
        w = round(float(w), 3)
        edges += [i, j, int(w) if w.is_integer() else w, kind]
        counts[kind] += 1
    passages = [doc_index.get(pid, -1) for pid in graph.passages]
    logger.info("report: entity graph of %d entities, %d passages, %d edges (%s) read in %.1fs", n_ent,
                len(passages), len(edges) // 4, ", ".join(f"{EDGE_KINDS[k]} {int(n)}" for k, n in enumerate(counts)),
                time.perf_counter() - start)
    return {"entities": list(graph.entities), "passages": passages, "edges": edges}

"""Synthetic inputs shared by the PageRank benchmarks (``bench_ppr``, ``bench_latency``)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def synthetic_graph(n_entities: int, n_passages: int, seed: int) -> tuple[sp.csr_matrix, int]:
    """A symmetric entity-passage graph shaped like HippoRAG 2's MuSiQue graph: passages contain
    Zipf-distributed entities, entities co-occur within a passage, each entity gets a few synonym edges.
    Returns the adjacency (entities first, then passages) and the number of entities."""
    rng = np.random.default_rng(seed)
    rows, cols, vals = [], [], []
    for p in range(n_passages):
        ents = np.unique(np.minimum(rng.zipf(1.3, size=rng.integers(4, 14)) - 1 + rng.integers(0, n_entities, 1),
                                    n_entities - 1) % n_entities)
        ents = np.unique(np.concatenate([ents, rng.integers(0, n_entities, size=6)]))
        rows += [n_entities + p] * len(ents)
        cols += ents.tolist()
        vals += [1.0] * len(ents)
        a, b = np.triu_indices(len(ents), k=1)
        rows += ents[a].tolist()
        cols += ents[b].tolist()
        vals += [1.0] * len(a)
    syn = rng.integers(0, n_entities, size=(n_entities * 5, 2))
    syn = syn[syn[:, 0] != syn[:, 1]]
    rows += syn.min(1).tolist()
    cols += syn.max(1).tolist()
    vals += (0.8 + 0.2 * rng.random(len(syn))).tolist()
    n = n_entities + n_passages
    upper = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
    upper.sum_duplicates()
    return (upper + upper.T).tocsr(), n_entities

"""Per-query speed of sirerag's Personalized PageRank against igraph's on a ~100k-node graph.

By default the graph is synthetic with the shape of HippoRAG 2's MuSiQue graph (about
86k phrase nodes, 10k passage nodes, 1.3M edges, Table 14 of the paper): passages
contain Zipf-distributed entities, entities co-occur within a passage, and each entity
gets a few synonym edges. ``--index DIR`` benchmarks the graph of a built index instead.
Each query resets on 5 entity seeds plus 0.05 x a random score on every passage node,
as HippoRAG 2 does. Both engines reuse their prepared graph across queries.

    python scripts/bench_ppr.py --queries 50
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import scipy.sparse as sp


def synthetic_graph(n_entities: int, n_passages: int, seed: int) -> tuple[sp.csr_matrix, int]:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", help="benchmark the entity graph of this index instead of a synthetic one")
    ap.add_argument("--entities", type=int, default=86_000)
    ap.add_argument("--passages", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--damping", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import igraph as ig

    from sirerag.graph.ppr import PersonalizedPageRank

    if args.index:
        from sirerag.graph.store import load_graph
        from sirerag.pool.store import load_index

        graph, _ = load_graph(load_index(args.index).component("graph"))
        adjacency, n_entities = graph.adjacency, graph.n_entities
    else:
        adjacency, n_entities = synthetic_graph(args.entities, args.passages, args.seed)
    n = adjacency.shape[0]
    print(f"graph: {n} nodes ({n_entities} entities), {adjacency.nnz // 2} undirected edges")

    start = time.perf_counter()
    ours = PersonalizedPageRank(adjacency, damping=args.damping)
    prep_ours = time.perf_counter() - start
    start = time.perf_counter()
    upper = sp.triu(adjacency, k=1).tocoo()
    g = ig.Graph(n=n, edges=np.column_stack([upper.row, upper.col]).tolist(), directed=False)
    g.es["weight"] = upper.data.tolist()
    prep_ig = time.perf_counter() - start

    rng = np.random.default_rng(args.seed + 1)
    resets = np.zeros((n, args.queries))
    for q in range(args.queries):
        resets[rng.choice(n_entities, 5, replace=False), q] = rng.random(5) / rng.integers(1, 20, 5)
        resets[n_entities:, q] = 0.05 * rng.random(n - n_entities)

    t_ours, t_ig, l1 = [], [], []
    for q in range(args.queries):
        start = time.perf_counter()
        p = ours.run(resets[:, q])
        t_ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        ref = g.personalized_pagerank(damping=args.damping, reset=resets[:, q].tolist(), weights="weight",
                                      directed=False, implementation="prpack")
        t_ig.append(time.perf_counter() - start)
        l1.append(float(np.abs(p - np.asarray(ref)).sum()))
    start = time.perf_counter()
    ours.run(resets)
    batched = (time.perf_counter() - start) / args.queries

    def ms(values: list[float]) -> str:
        values = sorted(values)
        return (f"p50 {1000 * statistics.median(values):7.1f} ms  "
                f"p95 {1000 * values[int(0.95 * (len(values) - 1))]:7.1f} ms")

    print(f"prepare once: sirerag {prep_ours:.2f}s, igraph {prep_ig:.2f}s")
    print(f"sirerag (scipy, one query at a time): {ms(t_ours)}  ({ours.last_iterations} iterations)")
    print(f"sirerag (scipy, {args.queries} queries batched): {1000 * batched:7.1f} ms per query")
    print(f"igraph prpack:                        {ms(t_ig)}")
    print(f"speed-up per query (median): {statistics.median(t_ig) / statistics.median(t_ours):.1f}x; "
          f"max L1 difference {max(l1):.1e}")


if __name__ == "__main__":
    main()

"""Per-query speed of sirerag's Personalized PageRank against igraph's on a ~100k-node graph.

By default the graph is synthetic with the shape of HippoRAG 2's MuSiQue graph (about
86k phrase nodes, 10k passage nodes, 1.3M edges, Table 14 of the paper): passages
contain Zipf-distributed entities, entities co-occur within a passage, and each entity
gets a few synonym edges. ``--index DIR`` benchmarks the graph of a built index instead.
Each query resets on 5 entity seeds plus 0.05 x a random score on every passage node,
as HippoRAG 2 does. Both engines reuse their prepared graph across queries.

    python -m benchmarks.bench_ppr --queries 50
"""
from __future__ import annotations

import argparse

import numpy as np
import scipy.sparse as sp

from benchmarks.harness import Report, Timer, add_json_argument, percentiles
from benchmarks.synthetic import synthetic_graph


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", help="benchmark the entity graph of this index instead of a synthetic one")
    ap.add_argument("--entities", type=int, default=86_000)
    ap.add_argument("--passages", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--damping", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    add_json_argument(ap)
    args = ap.parse_args()
    report = Report("bench_ppr")

    import igraph as ig

    from sirerag.graph.ppr import PersonalizedPageRank

    if args.index:
        from sirerag.graph.store import load_graph
        from sirerag.pool.loaded import load_index

        folder = load_index(args.index).component("graph")
        if folder is None:
            raise SystemExit(f"{args.index}: the index has no graph; build it with --graph")
        graph, _ = load_graph(folder)
        adjacency, n_entities = graph.adjacency, graph.n_entities
    else:
        adjacency, n_entities = synthetic_graph(args.entities, args.passages, args.seed)
    n = adjacency.shape[0]
    print(f"graph: {n} nodes ({n_entities} entities), {adjacency.nnz // 2} undirected edges")

    with Timer() as prep_ours:
        ours = PersonalizedPageRank(adjacency, damping=args.damping)
    with Timer() as prep_ig:
        upper = sp.triu(adjacency, k=1).tocoo()
        g = ig.Graph(n=n, edges=np.column_stack([upper.row, upper.col]).tolist(), directed=False)
        g.es["weight"] = upper.data.tolist()

    rng = np.random.default_rng(args.seed + 1)
    resets = np.zeros((n, args.queries))
    for q in range(args.queries):
        resets[rng.choice(n_entities, 5, replace=False), q] = rng.random(5) / rng.integers(1, 20, 5)
        resets[n_entities:, q] = 0.05 * rng.random(n - n_entities)

    t_ours, t_ig, l1 = [], [], []
    for q in range(args.queries):
        with Timer() as one:
            p = ours.run(resets[:, q])
        t_ours.append(one.wall_s)
        with Timer() as one:
            ref = g.personalized_pagerank(damping=args.damping, reset=resets[:, q].tolist(), weights="weight",
                                          directed=False, implementation="prpack")
        t_ig.append(one.wall_s)
        l1.append(float(np.abs(p - np.asarray(ref)).sum()))
    with Timer() as batch:
        ours.run(resets)
    ours_ms, ig_ms = percentiles(t_ours, unit="ms", ndigits=1), percentiles(t_ig, unit="ms", ndigits=1)
    speed_up = float(np.median(t_ig) / np.median(t_ours))

    def ms(stats: dict) -> str:
        return f"p50 {stats['p50_ms']:7.1f} ms  p95 {stats['p95_ms']:7.1f} ms"

    print(f"prepare once: sirerag {prep_ours.wall_s:.2f}s, igraph {prep_ig.wall_s:.2f}s")
    print(f"sirerag (scipy, one query at a time): {ms(ours_ms)}  ({ours.last_iterations} iterations)")
    print(f"sirerag (scipy, {args.queries} queries batched): {1000 * batch.wall_s / args.queries:7.1f} ms per query")
    print(f"igraph prpack:                        {ms(ig_ms)}")
    print(f"speed-up per query (median): {speed_up:.1f}x; max L1 difference {max(l1):.1e}")
    report.results.update({
        "graph": {"nodes": n, "entities": n_entities, "edges": int(adjacency.nnz // 2), "index": args.index},
        "prepare_s": {"sirerag": round(prep_ours.wall_s, 3), "igraph": round(prep_ig.wall_s, 3)},
        "sirerag_one_query": ours_ms, "sirerag_iterations": ours.last_iterations,
        "sirerag_batched_ms_per_query": round(1000 * batch.wall_s / args.queries, 2), "igraph_prpack": ig_ms,
        "speed_up_p50": round(speed_up, 2), "max_l1_difference": max(l1)})
    report.write(args.json_out)


if __name__ == "__main__":
    main()

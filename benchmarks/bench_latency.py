"""Single-query latency (p50/p95, ms) of dense, BM25, hybrid and PPR retrieval.

On a real index (``--index DIR --questions Q.jsonl``) every retriever answers the same
questions one at a time (``search``, not ``search_many``) after a warm-up query; on a
synthetic graph of ``--nodes`` nodes shaped like HippoRAG 2's MuSiQue graph
(``benchmarks/synthetic.py``) the PageRank step alone is timed with HippoRAG 2-style
resets (5 entity seeds plus 0.05 x a score on every passage node).

    python -m benchmarks.bench_latency --index idx-musique --questions ../shared/bench/musique/questions.jsonl
    python -m benchmarks.bench_latency --nodes 100000
"""
from __future__ import annotations

import argparse

import numpy as np

from benchmarks.harness import Report, Timer, add_json_argument, percentiles
from benchmarks.synthetic import synthetic_graph

RETRIEVERS = {
    "dense": ("dense", {}),
    "bm25": ("bm25", {}),
    "dense+bm25": ("dense+bm25", {}),
    "ppr (default)": ("ppr", {}),
    "ppr (power iteration)": ("ppr", {"walk": "power"}),
    "ppr (ner)": ("ppr", {"linking": "ner"}),
    "dense+bm25+ppr": ("dense+bm25+ppr", {"linking": "ner"}),
}


def real_index(args: argparse.Namespace) -> dict[str, dict[str, float | int | None]]:
    import torch

    from sirerag.evaluation.retrieval import load_questions
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever
    from sirerag.retrievers.dense import index_embedder

    if args.threads:
        torch.set_num_threads(args.threads)
    index = load_index(args.index)
    questions = [q.question for q in load_questions(args.questions, split=args.split, limit=args.queries)]
    embedder = index_embedder(index)
    has_graph = index.component("graph") is not None
    out = {}
    for label, (name, options) in RETRIEVERS.items():
        if "ppr" in name and not has_graph:
            continue
        kwargs = dict(options) if name == "bm25" else {"embedder": embedder, **options}
        retriever = load_retriever(name, index, **kwargs)
        retriever.search("warm up query about Paris", k=10)
        times = []
        for q in questions:
            with Timer() as one:
                retriever.search(q, k=10)
            times.append(one.wall_s)
        out[label] = percentiles(times, unit="ms", ndigits=2)
        print(label, out[label], flush=True)
    out["torch_threads"] = {"threads": torch.get_num_threads()}
    return out


def synthetic(args: argparse.Namespace) -> dict[str, dict[str, float | int | None]]:
    """PageRank alone, both walks, on a synthetic graph of ``--nodes`` nodes (a tenth of them passages): a few
    entity seeds plus 0.05 x a passage score on every passage, as a search's reset."""
    from sirerag.core.config import GraphConfig
    from sirerag.core.config.retrieval import PPRSettings
    from sirerag.graph.push import make_walk

    n_passages = max(args.nodes // 10, 1)
    adjacency, n_entities = synthetic_graph(args.nodes - n_passages, n_passages, 0)
    n = adjacency.shape[0]
    graph, settings = GraphConfig(), PPRSettings()
    out: dict[str, dict[str, float | int | None]] = {}
    for walk in ("power", "push"):
        pagerank = make_walk(adjacency, walk, damping=graph.damping, tol=graph.tol, max_iter=graph.max_iter,
                             push_tol=settings.push_tol)
        rng = np.random.default_rng(1)
        times = []
        for _ in range(args.queries + 1):  # the first is a warm-up (the push's compilation)
            nodes = np.concatenate([rng.choice(n_entities, 5, replace=False), np.arange(n_entities, n)])
            weights = np.concatenate([rng.random(5), 0.05 * rng.random(n - n_entities)])
            with Timer() as one:
                pagerank.run_entries([(nodes, weights)])
            times.append(one.wall_s)
        out[walk] = {"nodes": n, "edges": int(adjacency.nnz // 2), **percentiles(times[1:], unit="ms", ndigits=2)}
        print(f"ppr synthetic ({walk})", out[walk], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", help="a built index (with --graph for the PPR rows)")
    ap.add_argument("--questions", help="questions.jsonl for --index")
    ap.add_argument("--split")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--nodes", type=int, help="also time PageRank on a synthetic graph of this many nodes")
    ap.add_argument("--threads", type=int, help="torch threads for query encoding")
    add_json_argument(ap)
    args = ap.parse_args()
    report = Report("bench_latency")
    result = report.results
    if args.index:
        result["index"] = real_index(args)
    if args.nodes:
        result["synthetic"] = synthetic(args)
    report.write(args.json_out)


if __name__ == "__main__":
    main()

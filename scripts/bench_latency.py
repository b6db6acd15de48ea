"""Single-query latency (p50/p95, ms) of dense, BM25, hybrid and PPR retrieval.

On a real index (``--index DIR --questions Q.jsonl``) every retriever answers the same
questions one at a time (``search``, not ``search_many``) after a warm-up query; on a
synthetic graph of ``--nodes`` nodes shaped like HippoRAG 2's MuSiQue graph
(``scripts/bench_ppr.py``) the PageRank step alone is timed with HippoRAG 2-style
resets (5 entity seeds plus 0.05 x a score on every passage node).

    python scripts/bench_latency.py --index idx-musique --questions ../shared/bench/musique/questions.jsonl
    python scripts/bench_latency.py --nodes 100000
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

RETRIEVERS = {
    "dense": ("dense", {}),
    "bm25": ("bm25", {}),
    "dense+bm25": ("dense+bm25", {}),
    "ppr (ner)": ("ppr", {"linking": "ner"}),
    "dense+bm25+ppr": ("dense+bm25+ppr", {"linking": "ner"}),
}


def percentiles(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 2), "p95_ms": round(float(np.percentile(values, 95)), 2)}


def real_index(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    import torch

    from sirerag.evaluation.retrieval import load_questions
    from sirerag.pool.store import load_index
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
            start = time.perf_counter()
            retriever.search(q, k=10)
            times.append((time.perf_counter() - start) * 1000)
        out[label] = percentiles(times)
        print(label, out[label], flush=True)
    out["torch_threads"] = {"threads": torch.get_num_threads()}
    return out


def synthetic(args: argparse.Namespace) -> dict[str, float]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_ppr import synthetic_graph

    from sirerag.graph.ppr import PersonalizedPageRank

    n_passages = max(args.nodes // 10, 1)
    adjacency, n_entities = synthetic_graph(args.nodes - n_passages, n_passages, 0)
    pagerank = PersonalizedPageRank(adjacency, damping=0.5)
    rng = np.random.default_rng(1)
    times = []
    for _ in range(args.queries):
        reset = np.zeros(adjacency.shape[0])
        reset[rng.choice(n_entities, 5, replace=False)] = rng.random(5)
        reset[n_entities:] = 0.05 * rng.random(adjacency.shape[0] - n_entities)
        start = time.perf_counter()
        pagerank.run(reset[:, None])
        times.append((time.perf_counter() - start) * 1000)
    result = {"nodes": adjacency.shape[0], "edges": int(adjacency.nnz // 2), **percentiles(times)}
    print("ppr synthetic", result, flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", help="a built index (with --graph for the PPR rows)")
    ap.add_argument("--questions", help="questions.jsonl for --index")
    ap.add_argument("--split")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--nodes", type=int, help="also time PageRank on a synthetic graph of this many nodes")
    ap.add_argument("--threads", type=int, help="torch threads for query encoding")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    result = {"load": open("/proc/loadavg").read().split()[:3]}
    if args.index:
        result["index"] = real_index(args)
    if args.nodes:
        result["synthetic"] = synthetic(args)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""The approximate dense index (``sirerag.pool.ann``, usearch HNSW) against exact search, on synthetic vectors
or on a built index's pool.

Example (from the repository root)::

    python -m benchmarks.bench_ann --n 100000 --connectivity 16,32 --expansion-search 32,64,128 \
        --json ann_100k.json

The vectors: ``--n`` L2-normalised 384-d rows drawn around ``--clusters`` centres in a ``--latent``-d
subspace plus isotropic noise (text embeddings sit near a low-dimensional manifold; uniform random
384-d vectors, the worst case for any graph index, are a poor stand-in). The queries: ``--queries``
further rows of the same distribution. For each connectivity the index is built once (as a build stores
it: ``save_ann``, then opened memory-mapped as a search opens it) and searched with each expansion:

- ``recall_at_10``: the share of the exact top 10 (numpy, every row) that the approximate top 10 finds;
- ``score_recall_at_10``: the same, counting a found row whose score reaches the exact 10th score: a pool with
  duplicate texts has rows of equal score, and exact search's choice among them is arbitrary;
- latency of one query (candidates from the index, re-scored with the float32 rows as
  ``DenseRetriever`` does; the query is already a vector): p50, p95, p99 in ms;
- build wall and CPU seconds, the file's size; and exact search's latency for comparison.

With ``--index DIR --questions FILE`` (repeatable) the vectors are the index's pool (``embeddings.npy``) and the
queries the first ``--queries`` questions of the files (read in turn), encoded as a search encodes them::

    python -m benchmarks.bench_ann --index /tmp/scale/work/index-30000 \
        --questions ../shared/bench/musique/questions.jsonl --questions ../shared/bench/hotpotqa/questions.jsonl
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import Report, Timer, add_json_argument, peak_rss_mib, percentiles


def synthetic(n: int, dim: int, latent: int, clusters: int, noise: float, seed: int) -> np.ndarray:
    """``n`` unit rows: cluster centres in a random ``latent``-d subspace of ``dim``, Gaussian spread, noise."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((dim, latent)))[0].T.astype(np.float32)  # latent x dim
    centres = rng.standard_normal((clusters, latent)).astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    block = 50_000
    for start in range(0, n, block):
        m = min(block, n - start)
        z = centres[rng.integers(0, clusters, m)] + 0.6 * rng.standard_normal((m, latent)).astype(np.float32)
        rows = z @ basis + noise * rng.standard_normal((m, dim)).astype(np.float32)
        out[start:start + m] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def index_data(index: str, questions: list[str], n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """The pool vectors of the index ``index`` (float32, in memory) and ``n_queries`` questions read in turn
    from the ``questions`` files, encoded with the index's query embedder."""
    import itertools

    from sirerag.core.io import load_npy, read_manifest
    from sirerag.embedding import load_query_embedder
    from sirerag.embedding.precision import precision_of
    from sirerag.evaluation.retrieval import load_questions

    manifest = read_manifest(index)
    if manifest.embedder is None:
        raise SystemExit(f"bench_ann: {index} records no embedder")
    vectors = np.ascontiguousarray(load_npy(Path(index) / "embeddings.npy"), dtype=np.float32)
    per_file = [[q.question for q in load_questions(path)] for path in questions]
    texts = list(itertools.islice((t for row in itertools.zip_longest(*per_file) for t in row if t), n_queries))
    spec = manifest.embedder.spec or ""
    embedder = load_query_embedder(manifest.embedder.load_spec or spec, precision=precision_of(spec))
    return vectors, np.asarray(embedder.encode_queries(texts), dtype=np.float32)


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    from sirerag.retrievers.dense import top_k

    return np.stack([top_k(vectors @ q, k) for q in queries])


def recall(found: np.ndarray, truth: np.ndarray, vectors: np.ndarray, query: np.ndarray) -> tuple[float, float]:
    """``(by id, by score)`` of one query: the share of the exact top rows ``truth`` among the ``found`` rows, and
    the share of ``found`` rows scoring at least the lowest of ``truth`` (ties with it count), at most 1."""
    k = len(truth)
    by_id = len(set(found.tolist()) & set(truth.tolist())) / k
    kth = float((vectors[truth] @ query).min())
    return by_id, min(k, int(((vectors[found] @ query) >= kth - 1e-6).sum())) / k


def run(vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray, connectivity: int, expansions: list[int],
        args: argparse.Namespace) -> dict[str, Any]:
    from sirerag.core.config.dense import DenseConfig
    from sirerag.pool.ann import ANN_DIR, ANN_FILE, load_ann, save_ann
    from sirerag.retrievers.dense import top_k

    settings = DenseConfig(ann_min_vectors=0, ann_connectivity=connectivity, ann_expansion_add=args.expansion_add,
                           ann_dtype=args.dtype, ann_threads=args.threads)
    with tempfile.TemporaryDirectory(dir=args.tmp) as folder:
        with Timer() as built:
            component = save_ann(folder, vectors, settings)
        size = (Path(folder) / ANN_DIR / ANN_FILE).stat().st_size
        row: dict[str, Any] = {"connectivity": connectivity, "expansion_add": args.expansion_add, "dtype": args.dtype,
                               "threads": args.threads, "build": built.to_dict(ndigits=2),
                               "file_mib": round(size / 2**20, 1), "searches": []}
        for expansion in expansions:
            ann = load_ann(folder, component, len(vectors), vectors.shape[1], expansion_search=expansion)
            found, times = [], []
            for q in queries:
                with Timer() as one:
                    rows = ann.candidates(q[None, :], args.k)[0]
                    scores = vectors[rows] @ q
                    best = rows[top_k(scores, args.k)]
                times.append(one.wall_s)
                found.append(best)
            shares = [recall(f, t, vectors, q) for f, t, q in zip(found, truth, queries)]
            by_id, by_score = np.array(shares).mean(axis=0)
            row["searches"].append({"expansion_search": expansion, f"recall_at_{args.k}": round(float(by_id), 4),
                                    f"score_recall_at_{args.k}": round(float(by_score), 4),
                                    "latency": percentiles(times[args.warmup:], unit="ms")})
            del ann
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="vectors in the index")
    parser.add_argument("--index", help="use this built index's pool vectors instead of synthetic ones")
    parser.add_argument("--questions", action="append", default=[],
                        help="with --index: a questions.jsonl whose questions are the queries (repeat)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--latent", type=int, default=48, help="dimension of the subspace the centres lie in")
    parser.add_argument("--clusters", type=int, default=2000)
    parser.add_argument("--noise", type=float, default=0.05, help="isotropic noise per dimension")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20, help="first queries left out of the latencies")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--connectivity", default="16", help="comma-separated HNSW connectivities (M)")
    parser.add_argument("--expansion-search", default="32,64,128", help="comma-separated search expansions (ef)")
    parser.add_argument("--expansion-add", type=int, default=128)
    parser.add_argument("--dtype", default="f16", choices=("f32", "f16", "i8"))
    parser.add_argument("--threads", type=int, default=1, help="build threads (0: every CPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmp", help="folder for the index files (default: the system's)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    report = Report("bench_ann", argv)
    if bool(args.index) != bool(args.questions):
        parser.error("--index and --questions go together")
    with Timer() as made:
        if args.index:
            vectors, queries = index_data(args.index, args.questions, args.queries)
            args.n, args.dim = vectors.shape
        else:
            data = synthetic(args.n + args.queries, args.dim, args.latent, args.clusters, args.noise, args.seed)
            vectors, queries = data[:args.n], data[args.n:]
    with Timer() as exact:
        truth = exact_top(vectors, queries, args.k)
    exact_ms = exact.wall_s * 1000 / len(queries)
    runs = [run(vectors, queries, truth, int(c), [int(e) for e in args.expansion_search.split(",")], args)
            for c in args.connectivity.split(",")]
    import usearch

    report.results.update(index=args.index, questions=args.questions, n=args.n, dim=args.dim, latent=args.latent,
                          clusters=args.clusters, noise=args.noise,
                          queries=args.queries, k=args.k, usearch=usearch.__version__,
                          data_s=round(made.wall_s, 1), exact_ms_per_query=round(exact_ms, 2), runs=runs,
                          peak_rss_mib=peak_rss_mib())
    report.write(args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

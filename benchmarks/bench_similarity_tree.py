"""Time the similarity-tree build (clustering) and check the fast BIC search.

Example::

    python -m benchmarks.bench_similarity_tree /work/shared/bench/2wikimultihopqa/corpus.jsonl --exhaustive

The passages are embedded with MiniLM once (``passage`` mode: one chunk per
passage); the matrix is cached as ``.npy`` under ``--cache-dir`` so reruns skip
it. The tree is then built with a stand-in summariser that is NOT part of the
product (the first 50 tokens of a cluster's first member), so the timings are
those of clustering; summary embedding (MiniLM) is timed separately. Numba
compiles UMAP on first use: a warm-up fit on random data runs before the clock.

Reported: seconds per stage (wall-clock, and CPU time, which is the better
measure on a shared machine: the clustering runs on one thread), UMAP and Gaussian-mixture fits, peak
RSS and nodes per level. With ``--exhaustive`` it also (1) reruns every BIC search
of the fast build on the same reduced data with the exhaustive scan of all k and
reports how often the chosen k agrees, and (2) times a whole build with
``bic_search = "exhaustive"`` (RAPTOR's scan) for comparison.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks.harness import Report, Timer, add_json_argument, peak_rss_mib
from sirerag.clustering import ClusterStats, search_k
from sirerag.clustering.gmm import fit_mixture
from sirerag.core.config import ChunkingConfig, ClusteringConfig
from sirerag.core.io import load_npy, save_npy
from sirerag.corpus.load import load_corpus
from sirerag.embedding import load_embedder
from sirerag.text.chunking import chunk_documents
from sirerag.text.tokens import get_encoding
from sirerag.trees.recursive import build_summary_levels
from sirerag.trees.similarity import leaves_from_chunks


class FirstTokensSummarizer:
    """Benchmark stand-in, not a summariser: the first ``n`` tokens of a group's first text."""

    def __init__(self, n: int = 50) -> None:
        self.n = n
        self.encoding = get_encoding("cl100k_base")

    @property
    def spec(self) -> str:
        return f"bench:first-{self.n}-tokens"

    def summarize(self, groups):  # noqa: ANN001, ANN201
        out = []
        for group in groups:
            tokens = self.encoding.encode(group[0] if group else "", disallowed_special=())
            out.append(self.encoding.decode_bytes(tokens[: self.n]).decode("utf-8", errors="ignore"))
        return out


class TimedEmbedder:
    """Wraps an embedder to add up the CPU seconds spent encoding summaries."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner, self.cpu_seconds = inner, 0.0
        self.spec, self.dim = inner.spec, inner.dim

    def encode_documents(self, texts):  # noqa: ANN001, ANN201
        with Timer() as timer:
            vectors = self.inner.encode_documents(texts)
        self.cpu_seconds += timer.cpu_s
        return vectors


def cached_embeddings(texts: list[str], embedder, cache_dir: Path) -> tuple[np.ndarray, float]:  # noqa: ANN001
    key = hashlib.sha1("\n\x00".join([embedder.spec, *texts]).encode("utf-8")).hexdigest()[:16]
    path = cache_dir / f"leaves-{key}.npy"
    if path.is_file():
        return load_npy(path), 0.0
    with Timer() as timer:
        matrix = embedder.encode_documents(texts)
    save_npy(path, matrix)
    return matrix, timer.wall_s


def warm_up_umap(seed: int) -> float:
    """Compile UMAP's numba functions (both the exact and the approximate neighbour paths)."""
    from sirerag.clustering import cluster

    with Timer() as timer:
        rng = np.random.default_rng(seed)
        cluster(rng.normal(size=(60, 16)).astype(np.float32), [1] * 60, config=ClusteringConfig(), random_state=seed)
    return timer.wall_s


def build(chunks, leaves, embedder, *, bic_search: str, levels: int, seed: int, keep: bool) -> dict:  # noqa: ANN001
    stats = ClusterStats(keep_reduced=keep)
    base = leaves_from_chunks(chunks, leaves)
    embedder = TimedEmbedder(embedder)
    with Timer() as timer:
        tree = build_summary_levels(base, tree_name="similarity", embedder=embedder,
                                    summarizer=FirstTokensSummarizer(),
                                    clustering=ClusteringConfig(bic_search=bic_search), levels=levels,
                                    random_state=seed, show_progress=False, cluster_stats=stats)
    total, total_cpu = timer.wall_s, timer.cpu_s
    return {
        "bic_search": bic_search,
        "seconds_total": round(total, 2),
        "cpu_seconds_total": round(total_cpu, 2),
        "seconds": tree.stats.seconds,
        "cpu_seconds_embedding": round(embedder.cpu_seconds, 2),
        "cpu_seconds_without_embedding": round(total_cpu - embedder.cpu_seconds, 2),
        "clustering": stats.as_dict(),
        "nodes_per_level": [lv["nodes"] for lv in tree.stats.levels],
        "stop_reason": tree.stats.stop_reason,
        "_stats": stats,
    }


def compare_searches(stats: ClusterStats, seed: int, curves: list | None = None) -> dict:
    """Rerun each fast search exhaustively on the same reduced points (reusing the BIC
    values the fast search already computed: same k, same seed, same model)."""
    same, deltas, gaps, extra_fits = 0, [], [], 0
    for points, (_, k_max, k_fast), known in zip(stats.reduced, stats.searches, stats.bics):
        values = dict(known)

        def bic(k: int) -> float:
            nonlocal extra_fits
            if k not in values:
                try:
                    values[k] = float(fit_mixture(points, k, seed).bic(points))
                except ValueError:  # a collapsed component, as in the build
                    values[k] = float("inf")
                extra_fits += 1
            return values[k]

        with threadpool_limits(limits=1):  # as in the build
            k_full = search_k(bic, k_max, "exhaustive")
        if curves is not None:
            curves.append({"n": len(points), "k_max": k_max, "bic": [values[k] for k in range(1, k_max + 1)]})
        same += k_full == k_fast
        deltas.append(abs(k_full - k_fast))
        gaps.append((values[k_fast] - values[k_full]) / abs(values[k_full]))
    n = len(deltas)
    return {
        "searches": n,
        "same_k": same,
        "agreement": round(same / n, 4) if n else None,
        "within_1": sum(d <= 1 for d in deltas),
        "max_abs_k_difference": max(deltas) if deltas else 0,
        "mean_relative_bic_gap": float(np.mean(gaps)) if gaps else 0.0,
        "max_relative_bic_gap": float(np.max(gaps)) if gaps else 0.0,
        "exhaustive_fits_needed": extra_fits + sum(len(b) for b in stats.bics),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(__file__).resolve().parents[2] / "shared" / "bench" / "2wikimultihopqa" / "corpus.jsonl"
    parser.add_argument("corpus", nargs="?", default=str(default),
                        help="corpus file (.jsonl/.json) or folder")
    parser.add_argument("--limit", type=int, default=0, help="use the first N passages (0 = all)")
    parser.add_argument("--levels", type=int, default=4, help="tree levels, counting the leaves")
    parser.add_argument("--seed", type=int, default=224, help="random_state of UMAP and the mixtures")
    parser.add_argument("--exhaustive", action="store_true",
                        help="also compare with RAPTOR's exhaustive BIC scan (slow)")
    parser.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "sirerag-bench"),
                        help="where the leaf embedding matrix is cached")
    parser.add_argument("--curves", help="with --exhaustive: write every search's BIC(k) for k = 1..k_max "
                                         "to this JSON file (to study other search strategies offline)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    report = Report("bench_similarity_tree", argv)

    documents = load_corpus(args.corpus)
    if args.limit > 0:
        documents = documents[: args.limit]
    chunks = chunk_documents(documents, ChunkingConfig(mode="passage"))
    embedder = load_embedder("minilm", show_progress=False)
    leaves, embed_seconds = cached_embeddings([c.text for c in chunks], embedder, Path(args.cache_dir))
    result = report.results
    result.update({"corpus": str(args.corpus), "passages": len(chunks), "levels": args.levels, "seed": args.seed,
                   "leaf_embedding_seconds": round(embed_seconds, 2),
                   "umap_warm_up_seconds": round(warm_up_umap(args.seed), 2)})
    embedder.encode_documents(["warm up"])
    fast = build(chunks, leaves, embedder, bic_search="fast", levels=args.levels, seed=args.seed,
                 keep=args.exhaustive)
    result["fast"] = {k: v for k, v in fast.items() if k != "_stats"}
    if args.exhaustive:
        curves: list = []
        result["fast_vs_exhaustive_same_data"] = compare_searches(fast["_stats"], args.seed, curves)
        if args.curves:
            Path(args.curves).write_text(json.dumps(curves) + "\n", encoding="utf-8")
        full = build(chunks, leaves, embedder, bic_search="exhaustive", levels=args.levels, seed=args.seed,
                     keep=False)
        result["exhaustive"] = {k: v for k, v in full.items() if k != "_stats"}
    result["peak_rss_mib"] = peak_rss_mib()
    report.write(args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time the driver-side clustering plan for corpora too large to cluster whole: fit UMAP and the
BIC-chosen Gaussian mixture on a sample, then assign every other point (UMAP ``transform`` +
``predict_proba``, membership at p > threshold).

    python scripts/bench_sample_assign.py [--n 100000] [--sample 5000] [--dim 384] [--json OUT]

The points are synthetic (unit vectors around ``--centres`` random centres with Gaussian noise,
seeded), so the figures are costs, not clustering quality. Prints CPU and wall seconds per step,
the assignment cost per point and the process's peak RSS; report the load (printed) with them.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

import numpy as np


def synthetic(n: int, dim: int, centres: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    middle = rng.standard_normal((centres, dim)).astype(np.float32)
    points = middle[rng.integers(0, centres, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points


class Clock:
    def __init__(self, report: dict, name: str) -> None:
        self.report, self.name = report, name

    def __enter__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def __exit__(self, *exc: object) -> None:
        self.report[self.name] = {"wall_s": round(time.perf_counter() - self.wall, 2),
                                  "cpu_s": round(time.process_time() - self.cpu, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=5_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--centres", type=int, default=200)
    parser.add_argument("--seed", type=int, default=224)
    parser.add_argument("--threshold", type=float, default=0.1)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()

    from sirerag.cli.numba_cache import cache_umap_functions

    cache_umap_functions()  # numba's compile cache, as a build uses it
    from umap import UMAP

    from sirerag.clustering.gmm import ClusterStats, best_mixture

    report: dict = {"n": args.n, "sample": args.sample, "dim": args.dim, "load_before": os.getloadavg()}
    with Clock(report, "generate"):
        points = synthetic(args.n, args.dim, args.centres, args.seed)
    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(args.n, size=args.sample, replace=False))
    with Clock(report, "umap_fit_sample"):
        reducer = UMAP(n_neighbors=int(np.sqrt(args.sample - 1)), n_components=10, metric="cosine",
                       random_state=args.seed, n_jobs=1)
        reduced_sample = reducer.fit_transform(points[sample])
    with Clock(report, "mixture_fit_sample"):
        mixture = best_mixture(reduced_sample, 50, args.seed, search="fast", stats=ClusterStats())
    report["k"] = int(mixture.n_components)
    members = np.zeros(args.n, dtype=np.int64)
    with Clock(report, "assign_rest"):
        for start in range(0, args.n, 20_000):
            block = points[start:start + 20_000]
            probabilities = mixture.predict_proba(reducer.transform(block))
            members[start:start + len(block)] = (probabilities > args.threshold).sum(axis=1)
    report["memberships_per_point"] = round(float(members.mean()), 3)
    report["assign_cpu_ms_per_point"] = round(1000 * report["assign_rest"]["cpu_s"] / args.n, 4)
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

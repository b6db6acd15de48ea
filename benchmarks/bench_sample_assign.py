"""Time the driver-side clustering plan for corpora too large to cluster whole: fit UMAP and the
BIC-chosen Gaussian mixture on a sample, then assign every other point (UMAP ``transform`` +
``predict_proba``, membership at p > threshold).

    python -m benchmarks.bench_sample_assign [--n 100000] [--sample 5000] [--dim 384] [--json OUT]

The points are synthetic (unit vectors around ``--centres`` random centres with Gaussian noise,
seeded), so the figures are costs, not clustering quality. Prints CPU and wall seconds per step,
the assignment cost per point and the process's peak RSS; report the load (printed) with them.
"""
from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from benchmarks.harness import Report, Timer, add_json_argument, peak_rss_mib


def synthetic(n: int, dim: int, centres: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    middle = rng.standard_normal((centres, dim)).astype(np.float32)
    points = middle[rng.integers(0, centres, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points


class Clock(Timer):
    """The harness's timer, storing ``{"wall_s", "cpu_s"}`` under ``report[name]`` when the block ends."""

    def __init__(self, report: dict, name: str) -> None:
        super().__init__()
        self.report, self.name = report, name

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self.report[self.name] = {"wall_s": round(self.wall_s, 2), "cpu_s": round(self.cpu_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=5_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--centres", type=int, default=200)
    parser.add_argument("--seed", type=int, default=224)
    parser.add_argument("--threshold", type=float, default=0.1)
    add_json_argument(parser)
    args = parser.parse_args()
    harness_report = Report("bench_sample_assign")

    from sirerag.cli.numba_cache import cache_umap_functions

    cache_umap_functions()  # numba's compile cache, as a build uses it
    from umap import UMAP

    from sirerag.clustering.gmm import ClusterStats, best_mixture

    report = harness_report.results
    report.update({"n": args.n, "sample": args.sample, "dim": args.dim})
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
    report["peak_rss_mib"] = peak_rss_mib()
    harness_report.write(args.json_out)


if __name__ == "__main__":
    main()

"""The cost curve of a full offline build: ``sirerag build CORPUS --out DIR --graph`` (both trees and the
graph, the defaults) at several corpus sizes, stage by stage, with each stage's growth exponent.

Example (from the repository root)::

    python -m benchmarks.bench_scale --sizes 1000,3000,10000 --work /tmp/scale \
        --json scale.json --markdown scale.md --plot docs/scale.png

For each size N the corpus is the first N rows of :mod:`benchmarks.scale_corpus` (the real bench
passages, then generated ones; written once to ``WORK/corpus-N.jsonl``), and the build runs in a child
process, ``python -m benchmarks.bench_build`` (per stage: wall time, CPU time, peak RSS so far; see
that module), into ``WORK/index-N`` with the embedding cache in ``WORK/cache-N``. The disk of each
stage is the size of the index files it writes (the build plan's ``writes``, read from the manifest's
file list). One size at a time, and resumable: a size whose report ``WORK/build-N.json`` exists is not
built again, and a killed build keeps its cache (a resumed size is marked ``resumed``: its embedding
figures are then cache hits).

The fit: for each stage and figure, least squares of ``log(cost) = log(a) + b log(N)`` over the sizes
measured, ``b`` the growth exponent; the expected cost at 1M and 10M passages is ``a N^b`` (an
extrapolation: with two sizes it is the slope between them). The times of a resumed size are what was left to
do, not the build's cost: they are shown (marked ``resumed``) but left out of the time fits and the time plot;
its peak RSS and disk are fitted with the rest.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks.harness import ROOT, Report, add_json_argument, run_command
from benchmarks.scale_corpus import DEFAULT_SOURCES, read_sources, write_corpus

FIGURES = ("wall_s", "cpu_s", "peak_rss_mib", "disk_mib")
#: figures a resumed size does not measure (its cached work is not redone)
TIMES = ("wall_s", "cpu_s")
TARGETS = (1_000_000, 10_000_000)
BUILD_ARGS = ("--graph",)
MIN_PLOTTED_S = 5.0


def corpus_for(work: Path, n: int, sources: Sequence[str], seed: int) -> Path:
    """``WORK/corpus-N.jsonl``, written once."""
    path = work / f"corpus-{n}.jsonl"
    if not path.exists():
        write_corpus(path, n, read_sources(sources), seed=seed)
    return path


def stage_disk(index: Path) -> dict[str, float]:
    """MiB of index files written by each stage of the index's build plan (``other``: the rest, the manifest)."""
    from sirerag.core.io import read_manifest
    from sirerag.pipeline.plan import BuildPlan

    manifest = read_manifest(index)
    plan = BuildPlan.from_config(manifest.build_config())
    owners: list[tuple[str, str]] = []  # (path prefix, stage)
    for stage in plan:
        for written in stage.writes:
            if written.startswith("component:"):
                component = manifest.component(written.split(":", 1)[1])
                if component is not None and component.path:
                    owners.append((component.path.rstrip("/") + "/", stage.name))
            else:
                owners.append((written, stage.name))
    disk: dict[str, float] = {}
    for rel, record in manifest.files.items():
        owner = next((name for prefix, name in owners if rel == prefix or rel.startswith(prefix)), "other")
        disk[owner] = disk.get(owner, 0.0) + record.size / 2**20
    disk["other"] = disk.get("other", 0.0) + (index / "manifest.json").stat().st_size / 2**20
    return {k: round(v, 3) for k, v in disk.items()}


def build_size(work: Path, n: int, sources: Sequence[str], seed: int) -> dict[str, Any]:
    """Build size ``n`` (or read its finished report): the stages' figures, disk included."""
    done = work / f"build-{n}.json"
    if done.exists():
        return json.loads(done.read_text(encoding="utf-8"))
    corpus = corpus_for(work, n, sources, seed)
    cache = work / f"cache-{n}"
    resumed = cache.exists() and any(cache.iterdir())
    partial = work / f"build-{n}.json.part"
    command = [sys.executable, "-m", "benchmarks.bench_build", str(corpus), "--out", str(work / f"index-{n}"),
               "--cache", str(cache), "--json", str(partial), "--", *BUILD_ARGS]
    child = run_command(command, log=work / f"build-{n}.log", cwd=ROOT)
    if child["returncode"] != 0:
        raise SystemExit(f"bench_scale: the build of {n} passages failed ({child['returncode']}); "
                         f"see {work / f'build-{n}.log'}")
    report = json.loads(partial.read_text(encoding="utf-8"))
    disk = stage_disk(work / f"index-{n}")
    stages = [{**s, "disk_mib": disk.get(s["stage"], 0.0)} for s in report["results"]["stages"]]
    result = {"n": n, "resumed": resumed, "child": child, "machine": report["machine"],
              "stages": stages, "total": {**report["results"]["total"], "disk_mib": round(sum(disk.values()), 3)},
              "disk_other_mib": disk.get("other", 0.0), "counts": report["results"]["counts"]}
    done.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    partial.unlink()
    return result


def fit(sizes: Sequence[int], values: Sequence[float | None]) -> dict[str, Any] | None:
    """Least squares of log(value) on log(size): exponent ``b``, and ``a N^b`` at 1M and 10M; also the
    straight line ``c + d N`` (``per_passage`` = d; a fixed cost such as the loaded model makes the
    exponent of a small range too low); None with fewer than two positive points."""
    points = [(n, v) for n, v in zip(sizes, values) if v and v > 0]
    if len(points) < 2:
        return None
    x, y = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    b, log_a = np.polyfit(x, y, 1)
    slope, intercept = np.polyfit([p[0] for p in points], [p[1] for p in points], 1)
    return {"exponent": round(float(b), 3), "points": len(points),
            **{f"at_{t}": float(math.exp(log_a) * t ** b) for t in TARGETS},
            "per_passage": float(slope), **{f"linear_at_{t}": float(intercept + slope * t) for t in TARGETS}}


def curves(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per stage (and ``total``): each figure's values by size and its fit."""
    sizes = [r["n"] for r in runs]
    names = list(dict.fromkeys(s["stage"] for r in runs for s in r["stages"])) + ["total"]
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        rows = [next((s for s in r["stages"] if s["stage"] == name), None) if name != "total" else r["total"]
                for r in runs]
        out[name] = {}
        for figure in FIGURES:
            values = [row.get(figure) if row else None for row in rows]
            fitted = [None if figure in TIMES and r.get("resumed") else v for r, v in zip(runs, values)]
            out[name][figure] = {"values": values, "fitted": fitted, "fit": fit(sizes, fitted)}
    return out


def _cell(value: float | None, figure: str) -> str:
    if value is None:
        return "-"
    if figure in ("wall_s", "cpu_s"):
        if value >= 36000:
            return f"{value / 3600:.1f} h"
        return f"{value:.1f} s" if value < 600 else f"{value / 60:.0f} min"
    return f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value:.0f} MiB"


def markdown(sizes: Sequence[int], table: dict[str, dict[str, Any]], resumed: Sequence[bool] = ()) -> str:
    """One table per figure: stages by size, the exponent, the extrapolations (power law and straight line);
    the sizes ``resumed`` are marked so."""
    parts = []
    marks = list(resumed) or [False] * len(sizes)
    for figure in FIGURES:
        columns = [f"{n:,}" + (" (resumed)" if r else "") for n, r in zip(sizes, marks)]
        head = ["stage", *columns, "exponent", *(f"{t:,} (power)" for t in TARGETS),
                *(f"{t:,} (linear)" for t in TARGETS)]
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for name, figures in table.items():
            entry = figures[figure]
            got = entry["fit"]
            cells = [_cell(v, figure) for v in entry["values"]]
            tail = [f"{got['exponent']:.2f}", *(_cell(got[f"at_{t}"], figure) for t in TARGETS),
                    *(_cell(got[f"linear_at_{t}"], figure) for t in TARGETS)] if got else ["-"] * (1 + 2 * len(TARGETS))
            lines.append("| " + " | ".join([name, *cells, *tail]) + " |")
        parts.append(f"**{figure}**\n\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"


def plot(sizes: Sequence[int], table: dict[str, dict[str, Any]], path: Path) -> None:
    """Log-log wall time and peak RSS against N: measured points, the power-law fit (dashed) and the
    straight line (dotted) up to 10M."""
    from sirerag.core.errors import require

    require("matplotlib", "plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    grid = np.geomspace(min(sizes), TARGETS[-1], 50)
    for ax, figure, label in ((axes[0], "wall_s", "wall seconds"), (axes[1], "peak_rss_mib", "peak RSS (MiB)")):
        for name, figures in table.items():
            entry = figures[figure]
            if figure == "peak_rss_mib" and name != "total":
                continue  # peak RSS so far: only the build's total is a curve of its own
            points = [(n, v) for n, v in zip(sizes, entry["fitted"]) if v]
            if not points or not entry["fit"] or max(v for _, v in points) < MIN_PLOTTED_S:
                continue  # stages of a few seconds at every size would only crowd the plot
            line = ax.loglog(*zip(*points), "o", label=f"{name} (b={entry['fit']['exponent']:.2f})")[0]
            got = entry["fit"]
            b = got["exponent"]
            a = got[f"at_{TARGETS[0]}"] / TARGETS[0] ** b
            ax.loglog(grid, a * grid ** b, "--", color=line.get_color(), linewidth=0.8)
            slope = got["per_passage"]
            ax.loglog(grid, got[f"linear_at_{TARGETS[0]}"] + slope * (grid - TARGETS[0]), ":",
                      color=line.get_color(), linewidth=0.8)
        ax.set_xlabel("passages")
        ax.set_ylabel(label)
        ax.grid(True, which="both", linewidth=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,3000,10000,30000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--work", required=True, help="folder for corpora, indexes, caches and per-size reports")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", action="append", help="a real corpus.jsonl (repeat; default the bench corpora)")
    parser.add_argument("--markdown", help="write the tables here")
    parser.add_argument("--plot", help="write the log-log plot here (PNG; extra plot)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if not sizes or sizes[0] < 1:
        parser.error(f"--sizes must be positive, got {args.sizes!r}")
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    report = Report("bench_scale", argv)
    sources = [str(Path(s).resolve()) for s in (args.source or DEFAULT_SOURCES)]
    runs = [build_size(work, n, sources, args.seed) for n in sizes]
    table = curves(runs)
    report.results.update(sizes=sizes, build_args=list(BUILD_ARGS), runs=runs, curves=table)
    if args.markdown:
        Path(args.markdown).write_text(markdown(sizes, table, [bool(r.get("resumed")) for r in runs]),
                                       encoding="utf-8")
    if args.plot:
        plot(sizes, table, Path(args.plot))
    report.write(args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

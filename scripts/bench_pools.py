"""Build indexes over shared/bench corpora and evaluate them; prints a markdown table.

Each build and each eval runs as its own `sirerag` process under /usr/bin/time, so
wall time and peak memory (max RSS) are measured per step. Builds of one dataset
share an embedding cache, so later variants reuse the leaf embeddings (the table
says which build paid for them).

    python scripts/bench_pools.py --datasets musique 2wikimultihopqa hotpotqa \
        --variants none similarity --retrievers dense bm25 --split dev
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = {
    "none": ["--trees", "none"],
    "similarity": ["--trees", "similarity"],
    "sirerag": ["--trees", "similarity,relatedness"],
    "ablation_a": ["--trees", "similarity,relatedness", "--config", "{root}/ablation_a.toml"],
    "graph": ["--trees", "none", "--graph"],
}


def timed(cmd: list[str], log: Path) -> tuple[float, float]:
    """Run ``cmd``; return (seconds, peak RSS in MiB). Raises on failure with the log tail."""
    start = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.run(["/usr/bin/time", "-f", "MAXRSS_KB %M", *cmd], stdout=fh, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    text = log.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{text[-3000:]}")
    rss = [int(line.split()[1]) for line in text.splitlines() if line.startswith("MAXRSS_KB")]
    return seconds, (rss[-1] / 1024 if rss else float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=str(Path(__file__).resolve().parents[2] / "shared" / "bench"))
    ap.add_argument("--out", default="runs/bench")
    ap.add_argument("--datasets", nargs="+", default=["musique", "2wikimultihopqa", "hotpotqa"])
    ap.add_argument("--variants", nargs="+", default=["none", "similarity"], choices=sorted(VARIANTS))
    ap.add_argument("--retrievers", nargs="+", default=["dense", "bm25"])
    ap.add_argument("--split", default="dev")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--chunking", default="passage", choices=["passage", "tokens"])
    ap.add_argument("--rebuild", action="store_true", help="rebuild indexes that already exist")
    args = ap.parse_args()
    root = Path(args.out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    (root / "ablation_a.toml").write_text("[relatedness]\nsummaries = false\n")
    rows = []
    for dataset in args.datasets:
        bench = Path(args.bench) / dataset
        for variant in args.variants:
            index = root / dataset / variant
            build = [sys.executable, "-m", "sirerag.cli.main", "--quiet", "build", str(bench / "corpus.jsonl"),
                     "--out", str(index), "--chunking", args.chunking, "--cache", str(root / dataset / "cache"),
                     *[a.format(root=root) for a in VARIANTS[variant]]]
            if args.rebuild or not (index / "manifest.json").is_file():
                secs, rss = timed(build, root / f"{dataset}-{variant}-build.log")
                # results go beside the index: a rebuild replaces the index folder and refuses foreign files
                (root / dataset / f"{variant}-bench_build.json").write_text(
                    json.dumps({"seconds": secs, "max_rss_mib": rss}))
            info = json.loads((root / dataset / f"{variant}-bench_build.json").read_text())
            manifest = json.loads((index / "manifest.json").read_text())
            for retriever in args.retrievers:
                out = root / dataset / f"{variant}-eval-{retriever}.json"
                cmd = [sys.executable, "-m", "sirerag.cli.main", "--quiet", "eval", str(index), "--questions",
                       str(bench / "questions.jsonl"), "--retriever", retriever, "--json", str(out)]
                if args.split:
                    cmd += ["--split", args.split]
                if args.limit:
                    cmd += ["--limit", str(args.limit)]
                timed(cmd, root / f"{dataset}-{variant}-{retriever}-eval.log")
                result = json.loads(out.read_text())
                rows.append({"dataset": dataset, "variant": variant, "retriever": retriever,
                             "pool": manifest["counts"]["pool"]["entries"], "build_s": info["seconds"],
                             "build_rss_mib": info["max_rss_mib"], **result})
    cols = ["passage_recall@2", "passage_recall@5", "answer_recall@512", "answer_recall@1024", "latency_ms_p50"]
    print("| dataset | pool | retriever | n | " + " | ".join(cols) + " | build s | build peak MiB |")
    print("|---" * (len(cols) + 6) + "|")
    for r in rows:
        vals = " | ".join("" if r.get(c) is None else f"{r[c]:.3f}" if c != "latency_ms_p50" else f"{r[c]:.1f}"
                          for c in cols)
        print(f"| {r['dataset']} | {r['variant']} ({r['pool']}) | {r['retriever']} | {r['n_questions']} | {vals} "
              f"| {r['build_s']:.0f} | {r['build_rss_mib']:.0f} |")
    (root / "results.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()

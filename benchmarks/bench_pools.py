"""Build indexes over shared/bench corpora and evaluate them; prints a markdown table.

Each build and each eval runs as its own `sirerag` process, measured alone by the harness's
``run_command`` (wall and CPU seconds, peak RSS from ``wait4``). Builds of one dataset
share an embedding cache, so later variants reuse the leaf embeddings (the table
says which build paid for them).

    python -m benchmarks.bench_pools --datasets musique 2wikimultihopqa hotpotqa \
        --variants none similarity --retrievers dense bm25 --split dev

``--grid INDEX QUESTIONS`` instead evaluates, in one process, every retriever setting of
``--configs`` (a JSON file: ``{"label": ["retriever", {options}], ...}``, or the
built-in grid) over the index's full pool and over its leaves alone (the same index,
pool restricted to ``kind == leaf``), query embeddings computed once:

    python -m benchmarks.bench_pools --grid idx-musique ../shared/bench/musique/questions.jsonl --split dev

``--by FIELD`` (with ``--grid``) evaluates the questions in groups of one value of a field of their rows
(MuSiQue's ``hops``): one row per group (``"group": value``), then the row of all of them.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import Report, Timer, add_json_argument, run_command

VARIANTS = {
    "none": ["--trees", "none"],
    "similarity": ["--trees", "similarity"],
    "sirerag": ["--trees", "similarity,relatedness"],
    "ablation_a": ["--trees", "similarity,relatedness", "--config", "{root}/ablation_a.toml"],
    "graph": ["--trees", "none", "--graph"],
}


def timed(cmd: list[str], log: Path) -> dict:
    """Run ``cmd`` with its output in ``log``; return the harness's measurement of it (``wall_s``, ``cpu_s``,
    ``peak_rss_mib``). Raises on failure with the log tail."""
    result = run_command(cmd, log)
    if result["returncode"] != 0:
        raise SystemExit(f"failed ({result['returncode']}): {' '.join(cmd)}\n{log.read_text()[-3000:]}")
    return result


# label: (retriever name, its options); a --configs file holds the same as JSON
GRID: dict[str, tuple[str, dict[str, Any]]] = {
    "dense": ("dense", {}),
    "bm25": ("bm25", {}),
    "dense+bm25": ("dense+bm25", {}),
    "ppr-ner": ("ppr", {"linking": "ner"}),
    "dense+bm25+ppr": ("dense+bm25+ppr", {"linking": "ner"}),
}


class MemoEmbedder:
    """Wraps an embedder; remembers every query and document vector it returned."""

    def __init__(self, inner):
        self.inner, self.spec, self.dim = inner, inner.spec, inner.dim
        self.memo = {}

    def _encode(self, side, texts):
        import numpy as np

        missing = list(dict.fromkeys(t for t in texts if (side, t) not in self.memo))
        if missing:
            vectors = getattr(self.inner, f"encode_{side}")(missing)
            self.memo.update({(side, t): v for t, v in zip(missing, vectors)})
        return np.stack([self.memo[(side, t)] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def encode_queries(self, texts):
        return self._encode("queries", list(texts))

    def encode_documents(self, texts):
        return self._encode("documents", list(texts))


def leaves_only(index):
    """The same index with its pool restricted to leaves."""
    from dataclasses import replace

    from sirerag.core.types import Pool

    rows = [i for i, e in enumerate(index.pool.entries) if e.kind == "leaf"]
    return replace(index, pool=Pool(entries=tuple(index.pool.entries[i] for i in rows),
                                    embeddings=index.pool.embeddings[rows]))


def grouped(questions: list, path: str, by: str | None) -> dict:
    """``{"all": questions}``, or with ``by`` the questions by the value of that field of their rows."""
    if not by:
        return {"all": questions}
    value = {}
    with open(path, encoding="utf-8") as rows:
        for line in rows:
            if line.strip():
                row = json.loads(line)
                value[str(row.get("id"))] = row.get(by)
    out: dict = {}
    for q in questions:
        out.setdefault(value.get(q.id), []).append(q)
    return dict(sorted(out.items(), key=lambda kv: str(kv[0])))


def merged(results: list[dict]) -> dict:
    """The results of groups of questions as one: each mean weighted by its questions (answer recall by the
    questions it counts); the latency percentiles are the groups' weighted means, an approximation."""
    n = sum(r["n_questions"] for r in results)
    out = dict(results[0], n_questions=n)
    for key, value in results[0].items():
        if key.startswith(("passage_recall@", "ndcg@", "mrr@", "latency_ms_")):
            out[key] = sum(r[key] * r["n_questions"] for r in results) / n
        elif key.startswith("answer_recall@") and value is not None:
            counted = sum(r["answer_recall_questions"] for r in results)
            out[key] = sum(r[key] * r["answer_recall_questions"] for r in results) / max(counted, 1)
        elif key == "passage_recall_curve":
            out[key] = [sum(r[key][i] * r["n_questions"] for r in results) / n for i in range(len(value))]
        elif key in ("answer_recall_questions", "yes_no_excluded", "no_answer_excluded"):
            out[key] = sum(r[key] for r in results)
    return out


def grid(args, report: Report) -> None:
    import logging

    from sirerag.evaluation.retrieval import evaluate_retrieval, load_questions
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever
    from sirerag.retrievers.dense import index_embedder

    logging.basicConfig(level=logging.WARNING)
    index_dir, questions_path = args.grid
    configs: dict[str, tuple[str, dict[str, Any]]] = json.loads(Path(args.configs).read_text()) if args.configs \
        else GRID
    full = load_index(index_dir)
    pools = {"full": full, "leaves": leaves_only(full)}
    questions = load_questions(questions_path, split=args.split or None, limit=args.limit)
    groups = grouped(questions, questions_path, args.by)
    embedder = MemoEmbedder(index_embedder(full))
    rows = report.results.setdefault("rows", [])
    for label, (name, options) in configs.items():
        for pool_name in args.pools:
            index = pools[pool_name]
            with Timer() as timer:
                retriever = load_retriever(name, index, embedder=embedder, **options) if name != "bm25" \
                    else load_retriever(name, index, **options)
                results = {value: evaluate_retrieval(index.pool, retriever, group, show_progress=False).to_dict()
                           for value, group in groups.items()}
            if args.by:
                for value, result in results.items():
                    row = {"config": label, "pool": pool_name, "group": value, **result}
                    rows.append(row)
                    print(json.dumps({k: v for k, v in row.items() if k not in ("latency_ms_p95",)}), flush=True)
                results = {"all": merged(list(results.values()))}
            row = {"config": label, "pool": pool_name, "seconds": round(timer.wall_s, 1), **results["all"]}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("latency_ms_p95",)}), flush=True)
    report.write(args.json_out, show=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", nargs=2, metavar=("INDEX", "QUESTIONS"), help="evaluate a grid of retrievers in-process")
    ap.add_argument("--configs", help="with --grid: JSON file of {label: [retriever, {options}]}")
    ap.add_argument("--by", help="with --grid: evaluate the questions grouped by this field of their rows")
    ap.add_argument("--pools", nargs="+", default=["leaves", "full"], choices=["leaves", "full"])
    ap.add_argument("--bench", default=str(Path(__file__).resolve().parents[2] / "shared" / "bench"))
    ap.add_argument("--out", default="runs/bench")
    ap.add_argument("--datasets", nargs="+", default=["musique", "2wikimultihopqa", "hotpotqa"])
    ap.add_argument("--variants", nargs="+", default=["none", "similarity"], choices=sorted(VARIANTS))
    ap.add_argument("--retrievers", nargs="+", default=["dense", "bm25"])
    ap.add_argument("--split", default="dev")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--chunking", default="passage", choices=["passage", "tokens"])
    ap.add_argument("--rebuild", action="store_true", help="rebuild indexes that already exist")
    add_json_argument(ap)
    args = ap.parse_args()
    report = Report("bench_pools")
    if args.grid:
        return grid(args, report)
    from sirerag.core.io import read_manifest

    root = Path(args.out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    (root / "ablation_a.toml").write_text("[relatedness]\nsummaries = false\n")
    rows = report.results.setdefault("rows", [])
    for dataset in args.datasets:
        bench = Path(args.bench) / dataset
        for variant in args.variants:
            index = root / dataset / variant
            build = [sys.executable, "-m", "sirerag.cli.main", "--quiet", "build", str(bench / "corpus.jsonl"),
                     "--out", str(index), "--chunking", args.chunking, "--cache", str(root / dataset / "cache"),
                     *[a.format(root=root) for a in VARIANTS[variant]]]
            if args.rebuild or not (index / "manifest.json").is_file():
                measured = timed(build, root / f"{dataset}-{variant}-build.log")
                # results go beside the index: a rebuild replaces the index folder and refuses foreign files
                (root / dataset / f"{variant}-bench_build.json").write_text(json.dumps(measured))
            info = json.loads((root / dataset / f"{variant}-bench_build.json").read_text())
            manifest = read_manifest(index)
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
                             "pool": manifest.counts.pool.entries if manifest.counts.pool else None, "build_s": info["wall_s"],
                             "build_cpu_s": info["cpu_s"], "build_peak_rss_mib": info["peak_rss_mib"], **result})
    cols = ["passage_recall@2", "passage_recall@5", "answer_recall@512", "answer_recall@1024", "latency_ms_p50"]
    print("| dataset | pool | retriever | n | " + " | ".join(cols) + " | build s | build peak MiB |")
    print("|---" * (len(cols) + 6) + "|")
    for r in rows:
        vals = " | ".join("" if r.get(c) is None else f"{r[c]:.3f}" if c != "latency_ms_p50" else f"{r[c]:.1f}"
                          for c in cols)
        print(f"| {r['dataset']} | {r['variant']} ({r['pool']}) | {r['retriever']} | {r['n_questions']} | {vals} "
              f"| {r['build_s']:.0f} | {r['build_peak_rss_mib']:.0f} |")
    report.write(args.json_out or root / "results.json", show=False)


if __name__ == "__main__":
    main()

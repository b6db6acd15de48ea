"""Incremental update vs full rebuild: build on 80% of a corpus, ``add`` the other 20%, and compare
with a full build of 100% (issue 15).

Example (the run in docs/incremental.md)::

    python -m benchmarks.bench_incremental ../shared/bench/musique --questions 212 --split all \
        --passages 800 --thresholds 0,0.15,0.3,0.5 --extra-seeds 2 --work /tmp/bench-incr --json bench_incremental.json

The corpus is the gold passages of the first ``--questions`` questions (of ``--split``) plus the first other
passages of the corpus up to ``--passages`` in all; the held-out 20% is a seeded random sample of
it (gold passages included). The two paths use separate caches, so each pays for its own
embeddings. Recorded per path: summaries written (a counting wrapper around the summariser the
settings name), chunks extracted, LLM-equivalent calls (summaries + 2 per extracted chunk: the
LLM pipeline's coreference rewrite and extraction calls), wall and CPU seconds; and, for the final
indexes, dense passage_recall@5 and answer_recall@1024 over the questions, with the default pool rule
(passages first) and with ``pool_rule="native"`` (plain dense ranking of the mixed pool, where the
tree's summaries compete with the passages). ``--thresholds`` adds the
20% once per refresh threshold (``sirerag add --refresh-threshold``), each on a copy of the 80% index
and its cache; ``--extra-seeds K`` adds K full builds with other seeds: the quality spread between
equally valid builds.
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import Report, Timer, add_json_argument


def _subset(folder: Path, n_questions: int, n_passages: int, seed: int, split: str) -> tuple[list, list, list]:
    from sirerag.evaluation.retrieval import load_questions
    from sirerag.corpus.load import load_corpus

    questions = load_questions(folder / "questions.jsonl", split=None if split == "all" else split,
                               limit=n_questions)
    corpus = load_corpus(folder / "corpus.jsonl")
    gold = {p for q in questions for p in q.gold_passage_ids}
    chosen = [d for d in corpus if d.id in gold]
    chosen += [d for d in corpus if d.id not in gold][:max(0, n_passages - len(chosen))]
    order = {d.id: i for i, d in enumerate(corpus)}
    chosen.sort(key=lambda d: order[d.id])
    held = set(random.Random(seed).sample([d.id for d in chosen], len(chosen) // 5))
    return questions, [d for d in chosen if d.id not in held], [d for d in chosen if d.id in held]


def _timed(fn: Any) -> tuple[Any, float, float]:
    with Timer() as timer:
        out = fn()
    return out, round(timer.wall_s, 2), round(timer.cpu_s, 2)


def _quality(index_dir: Path, questions: list) -> dict[str, float]:
    from sirerag.evaluation.retrieval import evaluate_retrieval
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever

    index = load_index(index_dir)
    out: dict[str, Any] = {"pool_entries": len(index.pool)}
    for rule in ("passages", "native"):  # the default pool rule (passages first), and plain dense over the pool
        result = evaluate_retrieval(index.pool, load_retriever("dense", index, pool_rule=rule), questions,
                                    show_progress=False)
        prefix = "" if rule == "passages" else "native "
        out[f"{prefix}passage_recall@5"] = round(result.passage_recall[5], 4)
        out[f"{prefix}answer_recall@1024"] = round(result.answer_recall[1024] or 0.0, 4)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", help="a ../shared/bench/<set> folder (corpus.jsonl + questions.jsonl)")
    parser.add_argument("--questions", type=int, default=40, help="first N questions of --split")
    parser.add_argument("--split", default="dev", help="question split: dev, train or all (MuSiQue has 101 dev "
                                                       "questions; nothing is trained here, so train ones measure too)")
    parser.add_argument("--passages", type=int, default=600, help="passages in the subset (gold ones first)")
    parser.add_argument("--work", required=True, help="scratch folder for the indexes and caches; must be new or empty")
    parser.add_argument("--seed", type=int, default=7)
    add_json_argument(parser)
    parser.add_argument("--thresholds", default="0,0.3", metavar="T,T,...",
                        help="refresh thresholds to add with (each on its own copy of the 80%% index; default 0,0.3)")
    parser.add_argument("--extra-seeds", type=int, default=0, metavar="K",
                        help="also build 100%% with seeds seed+1..seed+K (embeddings cached): the spread of quality "
                             "between equally valid full builds")
    parser.add_argument("--seed-check", action="store_true", help="the same as --extra-seeds 1")
    args = parser.parse_args(argv)
    bench_report = Report("bench_incremental", argv)
    thresholds = [float(t) for t in args.thresholds.split(",")]
    extra = max(args.extra_seeds, 1 if args.seed_check else 0)

    import sirerag.pipeline.models as models_mod
    from sirerag.cli.numba_cache import cache_umap_functions, configure_numba_cache
    from sirerag.core.config import BuildConfig, ChunkingConfig
    from sirerag.pipeline.build import build_index
    from sirerag.pipeline.update import update_index
    from sirerag.trees.base import CountingSummarizer

    configure_numba_cache()
    cache_umap_functions()
    work = Path(args.work)
    if work.exists() and any(work.iterdir()):
        raise SystemExit(f"{work}: not empty; give a new or empty --work folder (nothing is deleted)")
    work.mkdir(parents=True, exist_ok=True)
    questions, base, held = _subset(Path(args.bench), args.questions, args.passages, args.seed, args.split)
    config = BuildConfig(seed=args.seed, chunking=ChunkingConfig(mode="passage")).validate()
    counters: list[CountingSummarizer] = []
    make = models_mod.make_summarizer

    def counted(*a: Any, **k: Any) -> CountingSummarizer:
        counters.append(CountingSummarizer(make(*a, **k)))
        return counters[-1]

    models_mod.make_summarizer = counted
    rows: dict[str, dict[str, Any]] = {}
    _, wall, cpu = _timed(lambda: build_index(base, work / "base", config,
                                                        cache_dir=work / "cache-incremental", show_progress=False))
    rows["build 80%"] = {"summaries": counters[-1].groups, "chunks_extracted": len(base), "wall_s": wall, "cpu_s": cpu}
    for threshold in thresholds:  # each add starts from its own copy of the 80% index and its cache
        name = f"add-{threshold:g}"
        shutil.copytree(work / "base", work / name)
        shutil.copytree(work / "cache-incremental", work / f"cache-{name}")
        report, wall, cpu = _timed(lambda: update_index(work / name, add=held, cache_dir=work / f"cache-{name}",
                                                        refresh_threshold=threshold))
        rows[f"add 20%, refresh threshold {threshold:g}"] = {
            "refresh_threshold": threshold, "summaries": counters[-1].groups,
            "chunks_extracted": report.counts["chunks_extracted"], "wall_s": wall, "cpu_s": cpu,
            "counts": report.counts, "timings": report.timings, **_quality(work / name, questions)}
    full_rows = []
    for k in range(extra + 1):  # seed + k: the spread between full builds that differ only in their seed
        other = BuildConfig(seed=args.seed + k, chunking=ChunkingConfig(mode="passage")).validate()
        _, wall, cpu = _timed(lambda: build_index(base + held, work / f"full-{k}", other,
                                                            cache_dir=work / "cache-full", show_progress=False))
        label = "full build 100%" + (f", seed + {k} (embeddings cached)" if k else "")
        rows[label] = {"seed": args.seed + k, "summaries": counters[-1].groups,
                       "chunks_extracted": len(base) + len(held), "wall_s": wall, "cpu_s": cpu,
                       **_quality(work / f"full-{k}", questions)}
        full_rows.append(rows[label])
    for row in rows.values():
        row["llm_equivalent_calls"] = row["summaries"] + 2 * row["chunks_extracted"]
    full = full_rows[0]
    spread = {m: [r[m] for r in full_rows] for m in ("passage_recall@5", "answer_recall@1024",
                                                     "native passage_recall@5", "native answer_recall@1024")}
    summary: dict[str, Any] = {
        "bench": args.bench, "questions": len(questions), "passages": len(base) + len(held), "added": len(held),
        "rows": rows, "full_builds": {m: {"min": min(v), "max": max(v), "mean": round(sum(v) / len(v), 4)}
                                      for m, v in spread.items()},
        "per_threshold": []}
    for row in rows.values():
        if "refresh_threshold" not in row:
            continue
        summary["per_threshold"].append({
            "refresh_threshold": row["refresh_threshold"],
            "share_of_full_calls": round(row["llm_equivalent_calls"] / full["llm_equivalent_calls"], 4),
            "share_of_full_summaries": round(row["summaries"] / max(full["summaries"], 1), 4),
            "summaries_stale": row["counts"].get("summaries_stale", 0),
            **{f"delta_{m}": round(row[m] - full[m], 4) for m in spread},
            **{f"delta_{m}_vs_mean_full": round(row[m] - summary["full_builds"][m]["mean"], 4) for m in spread}})
    bench_report.results.update(summary)
    bench_report.write(args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

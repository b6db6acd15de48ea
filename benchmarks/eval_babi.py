"""Supporting-fact recall on bAbI (qa1-qa5) per story: dense top-k vs the keyword graph.

Each question is answered from its own story only (``context_passage_ids``, in story
order). For every question the story's sentences are embedded (MiniLM by default),
the similarity + keyword graph of the BABILong blog post is built over them
(:mod:`sirerag.graph.keyword_graph`, the graph of ``--retriever keyword-graph``), and the
top-k sentences of each method are compared with the gold supporting facts. qa2 and qa3
are the multi-hop tasks. ``benchmarks.eval_babi_ask`` measures the same through ``ask``.

    python -m benchmarks.eval_babi --bench ../shared/bench/babi --split test --per-task 200 --k 3 5

Prints, per task and method, the mean supporting-fact recall@k and the share of
questions whose supporting facts are all retrieved; the harness report has the table (``results.table``).
"""
from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.harness import Report, Timer, add_json_argument
from sirerag.core.config.keyword_graph import KEYWORD_GRAPH_MODES as MODES
from sirerag.core.config.keyword_graph import KEYWORD_SOURCES, KeywordGraphConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="../shared/bench/babi")
    ap.add_argument("--split", default="test")
    ap.add_argument("--per-task", type=int, default=0, help="questions sampled per task (0: all)")
    ap.add_argument("--k", type=int, nargs="+", default=[3, 5])
    ap.add_argument("--seeds", type=int, default=KeywordGraphConfig.seeds,
                    help="top dense hits the graph search starts from")
    ap.add_argument("--keywords", choices=KEYWORD_SOURCES, default=KeywordGraphConfig.keywords,
                    help="entities: the offline entity tagger; content: non-stopword words; both: their union")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--seed", type=int, default=0)
    add_json_argument(ap)
    args = ap.parse_args()
    report = Report("eval_babi")

    from sirerag.embedding import load_embedder
    from sirerag.graph.keyword_graph import KeywordGraph, passage_keywords

    bench = Path(args.bench)
    text = {r["id"]: r["text"] for r in map(json.loads, open(bench / "corpus.jsonl", encoding="utf-8"))}
    questions = [q for q in map(json.loads, open(bench / "questions.jsonl", encoding="utf-8"))
                 if q["split"] == args.split]
    by_task: dict[str, list[dict]] = defaultdict(list)
    for q in questions:
        by_task[q["task"]].append(q)
    rng = random.Random(args.seed)
    if args.per_task:
        by_task = {t: sorted(rng.sample(qs, min(args.per_task, len(qs))), key=lambda q: q["id"])
                   for t, qs in by_task.items()}

    embedder = load_embedder(args.embedder, show_progress=False)
    needed = sorted({pid for qs in by_task.values() for q in qs for pid in q["context_passage_ids"]})
    unique = sorted({text[p] for p in needed})
    with Timer() as embedding:
        vectors = dict(zip(unique, embedder.encode_documents(unique)))
        kw = dict(zip(unique, passage_keywords(unique, args.keywords)))
        all_q = [q["question"] for qs in by_task.values() for q in qs]
        q_vectors = dict(zip(all_q, embedder.encode_queries(all_q)))
    print(f"embedded {len(unique)} distinct sentences and {len(set(all_q))} questions "
          f"in {embedding.wall_s:.1f}s with {embedder.spec}; keywords: {args.keywords}")

    table: dict[str, dict] = {}
    for task in sorted(by_task):
        recall: dict[tuple[str, int], list[float]] = {(m, k): [] for m in MODES for k in args.k}
        complete: dict[tuple[str, int], list[float]] = {(m, k): [] for m in MODES for k in args.k}
        for q in by_task[task]:
            ids = q["context_passage_ids"]
            sentences = [text[p] for p in ids]
            emb = np.stack([vectors[s] for s in sentences])
            gold = set(q["gold_passage_ids"])
            for mode in MODES:
                config = KeywordGraphConfig(mode=mode, seeds=args.seeds)
                retriever = KeywordGraph(emb, [kw[s] for s in sentences], config)
                for k in args.k:
                    got = {ids[i] for i in retriever.retrieve(q_vectors[q["question"]], k)}
                    recall[(mode, k)].append(len(gold & got) / len(gold))
                    complete[(mode, k)].append(float(gold <= got))
        row = {"questions": len(by_task[task]),
               "mean_story_sentences": float(np.mean([len(q["context_passage_ids"]) for q in by_task[task]]))}
        for (mode, k), values in recall.items():
            row[f"{mode}_recall@{k}"] = round(float(np.mean(values)), 4)
            row[f"{mode}_all@{k}"] = round(float(np.mean(complete[(mode, k)])), 4)
        table[task] = row

    header = "task  n     sents " + " ".join(f"{m + '@' + str(k):>11}" for k in args.k for m in MODES)
    print("\nsupporting-fact recall (share of questions with all facts retrieved)")
    print(header)
    for task, row in table.items():
        cells = " ".join(f"{row[f'{m}_recall@{k}']:.3f}({row[f'{m}_all@{k}']:.2f})".rjust(11)
                         for k in args.k for m in MODES)
        print(f"{task:<5} {row['questions']:<5} {row['mean_story_sentences']:5.1f} {cells}")
    report.results.update({"args": vars(args), "embedder": embedder.spec, "sentences": len(unique),
                           "embedding": embedding.to_dict(ndigits=2), "table": table})
    report.write(args.json_out, show=False)


if __name__ == "__main__":
    main()

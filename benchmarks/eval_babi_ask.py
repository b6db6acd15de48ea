"""Supporting-fact recall on bAbI of what ``Index.ask(..., order="document")`` reads, per retriever.

Each sampled question's story (its ``context_passage_ids``, the sentences told before it) is written as a
``.jsonl`` of one story's sentences and built into an index (MiniLM, no trees, one passage per sentence), the
use the keyword-graph retriever is made for. The question is then asked through ``Index.ask`` with ``order=
"document"`` and each retriever; the reader is a recorder (no model: it answers "unknown" and keeps the context it
was given), so the figure is the supporting-fact recall of the passages ``ask`` reads, and the check that it reads
them in the story's order. qa2 (two facts) and qa3 (three facts, long stories) are the multi-hop tasks.

    python -m benchmarks.eval_babi_ask --bench ../shared/bench/babi --tasks qa2 qa3 --per-task 100 -k 5
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import Report, Timer, add_json_argument

#: the retrievers compared: (label, retriever, options)
CONFIGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("dense", "dense", {}),
    ("bm25", "bm25", {}),
    ("keyword-graph hop", "keyword-graph", {"mode": "hop"}),
    ("keyword-graph ppr", "keyword-graph", {"mode": "ppr"}),
)


class Recorder:
    """A reader that calls no model: it keeps the context of each request and answers "unknown"."""

    spec = "recorder"

    def __init__(self) -> None:
        self.contexts: list[str] = []

    def complete(self, request: Any) -> Any:
        from sirerag.llm.base import Completion

        self.contexts.append(request.messages[-1][1])
        return Completion(text="unknown", prompt_tokens=0, completion_tokens=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="../shared/bench/babi")
    ap.add_argument("--split", default="test")
    ap.add_argument("--tasks", nargs="+", default=["qa2", "qa3"])
    ap.add_argument("--per-task", type=int, default=100, help="questions sampled per task (0: all)")
    ap.add_argument("-k", type=int, default=5, help="entries retrieved, all read (a sentence is ~8 tokens)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", help="embedding cache shared by the builds (default: a temporary folder)")
    add_json_argument(ap)
    args = ap.parse_args()
    report = Report("eval_babi_ask")

    import sirerag

    bench = Path(args.bench)
    rows = {r["id"]: r for r in map(json.loads, open(bench / "corpus.jsonl", encoding="utf-8"))}
    by_task: dict[str, list[dict]] = defaultdict(list)
    for q in map(json.loads, open(bench / "questions.jsonl", encoding="utf-8")):
        if q["split"] == args.split and q["task"] in args.tasks:
            by_task[q["task"]].append(q)
    rng = random.Random(args.seed)
    if args.per_task:
        by_task = {t: sorted(rng.sample(qs, min(args.per_task, len(qs))), key=lambda q: q["id"])
                   for t, qs in by_task.items()}

    work = Path(tempfile.mkdtemp(prefix="babi-ask-"))
    cache = Path(args.cache) if args.cache else work / "cache"
    table: dict[str, dict[str, Any]] = {}
    in_order = True
    with Timer() as total:
        for task in sorted(by_task):
            recall: dict[str, list[float]] = {label: [] for label, _, _ in CONFIGS}
            complete: dict[str, list[float]] = {label: [] for label, _, _ in CONFIGS}
            for q in by_task[task]:
                ids = q["context_passage_ids"]
                corpus = work / "story.jsonl"
                corpus.write_text("".join(json.dumps({"id": p, "title": rows[p]["title"], "text": rows[p]["text"]})
                                          + "\n" for p in ids), encoding="utf-8")
                shutil.rmtree(work / "index", ignore_errors=True)
                gold = set(q["gold_passage_ids"])
                with sirerag.Index.build(corpus, work / "index", trees=[], chunking={"mode": "passage"},
                                         cache_dir=cache, show_progress=False) as index:
                    for label, name, options in CONFIGS:
                        answer = index.ask(q["question"], Recorder(), k=args.k, retriever=name, order="document",
                                           **options)
                        read = [p for s in answer.sources for p in s.passages]
                        in_order &= [ids.index(p) for p in read] == sorted(ids.index(p) for p in read)
                        recall[label].append(len(gold & set(read)) / len(gold))
                        complete[label].append(float(gold <= set(read)))
            row: dict[str, Any] = {"questions": len(by_task[task]), "mean_story_sentences": round(float(np.mean(
                [len(q["context_passage_ids"]) for q in by_task[task]])), 1)}
            for label, _, _ in CONFIGS:
                row[label] = {"recall": round(float(np.mean(recall[label])), 4),
                              "all_facts": round(float(np.mean(complete[label])), 4)}
            table[task] = row
    shutil.rmtree(work, ignore_errors=True)

    print(f"\nsupporting-fact recall of what ask reads (k={args.k}, order=document); in brackets: share of "
          f"questions with every supporting fact read; read in story order: {in_order}")
    print("task  n     sents " + " ".join(f"{label:>19}" for label, _, _ in CONFIGS))
    for task, row in table.items():
        cells = " ".join(f"{row[label]['recall']:.3f} ({row[label]['all_facts']:.2f})".rjust(19)
                         for label, _, _ in CONFIGS)
        print(f"{task:<5} {row['questions']:<5} {row['mean_story_sentences']:5.1f} {cells}")
    report.results.update({"args": vars(args), "configs": [list(c) for c in CONFIGS], "table": table,
                           "read_in_story_order": in_order, "total": total.to_dict(ndigits=2)})
    report.write(args.json_out, show=False)


if __name__ == "__main__":
    main()

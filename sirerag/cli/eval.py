"""``sirerag eval DIR --questions Q.jsonl``: retrieval recall on benchmark questions."""
from __future__ import annotations

import argparse
from typing import Any

from sirerag.cli.common import add_common, progress_enabled
from sirerag.cli.search import add_retriever_options, retriever_options


def register(sub: Any) -> None:
    p = sub.add_parser("eval", help="evaluate retrieval on benchmark questions",
                       description="passage_recall@k and answer_recall@T of a retriever over an index.")
    p.add_argument("index", help="index directory written by sirerag build")
    p.add_argument("--questions", required=True, help="questions.jsonl with question, answers, gold_passage_ids")
    add_retriever_options(p)
    p.add_argument("--split", help="only questions of this split (e.g. dev)")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--depth", type=int, default=200, help="entries retrieved per question (default 200)")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="also write the results as JSON to OUT")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.evaluation.retrieval import evaluate_retrieval, load_questions
    from sirerag.io import write_json
    from sirerag.pool import load_index
    from sirerag.retrievers import load_retriever

    index = load_index(args.index)
    questions = load_questions(args.questions, split=args.split, limit=args.limit)
    retriever = load_retriever(args.retriever, index, **retriever_options(args))
    result: dict[str, Any] = {"index": str(index.path), "questions": str(args.questions)}
    result.update(evaluate_retrieval(index.pool, retriever, questions, depth=args.depth,
                                     show_progress=progress_enabled(args)))
    result["pool_entries"] = len(index.pool)
    print_table(result)
    if args.json_out:
        write_json(args.json_out, result)
    return 0


def print_table(result: dict[str, Any]) -> None:
    print(f"retriever {result['retriever']} on {result['n_questions']} questions "
          f"(pool of {result.get('pool_entries', '?')} entries)")
    for key, value in result.items():
        if "@" in key:
            shown = "n/a" if value is None else f"{value:.4f}"
            print(f"  {key:<22} {shown}")
    print(f"  answer_recall over {result['answer_recall_questions']} questions "
          f"({result['yes_no_excluded']} yes/no left out)")
    print(f"  latency ms p50 {result['latency_ms_p50']}  p95 {result['latency_ms_p95']}")

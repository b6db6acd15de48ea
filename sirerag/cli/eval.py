"""``sirerag eval DIR --questions Q.jsonl`` (or ``--beir FOLDER``): retrieval metrics on benchmark questions."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Sequence

from sirerag.cli.common import Subparsers, add_common, progress_enabled
from sirerag.cli.search import add_retriever_options, retriever_options

if TYPE_CHECKING:
    from sirerag.evaluation.retrieval import Question
    from sirerag.pool.loaded import LoadedIndex


def register(sub: Subparsers) -> None:
    p = sub.add_parser("eval", help="evaluate retrieval on benchmark questions",
                       description="passage_recall@k, nDCG@10, MRR@10 and answer_recall@T of a retriever over an "
                       "index.")
    p.add_argument("index", help="index directory written by sirerag build")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--questions", help="questions.jsonl with question, answers, gold_passage_ids")
    source.add_argument("--beir", metavar="FOLDER", help="a BEIR folder (queries.jsonl, qrels/SPLIT.tsv) whose "
                        "corpus.jsonl the index was built from; qrels with score > 0 are the gold")
    add_retriever_options(p)
    p.add_argument("--split", help="only questions of this split (e.g. dev); with --beir, the qrels file "
                   "(default test)")
    p.add_argument("--run", metavar="OUT.trec", help="also write the passage ranking of every question as a "
                   "TREC run file (for trec_eval, ranx, pyserini)")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--depth", type=int, default=200, help="entries retrieved per question (default 200)")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="also write the results as JSON to OUT")
    p.add_argument("--plot", metavar="PNG", help="also draw passage recall@k (k = 1..20) and answer recall against "
                   "the token budget into this PNG (needs sirerag[plot])")
    p.add_argument("--reader", metavar="LLM_SPEC", help="also answer each question from the retrieved entries "
                   "with this LLM (e.g. openai:gpt-4o) and report EM, F1 and TPQ")
    p.add_argument("--top-k", type=int, default=20, help="entries the reader gets (default 20, as in SiReRAG)")
    p.add_argument("--token-budget", type=int, help="instead of --top-k: entries in rank order up to this many tokens")
    p.add_argument("--baseline", metavar="DIR", help="with --reader: a baseline index (e.g. RAPTOR only) read the "
                   "same way, for TPER = (time/time_baseline) / (pool/pool_baseline)")
    p.add_argument("--reader-cache", metavar="DIR", help="cache reader calls here (default: no cache, so TPQ "
                   "measures the model)")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.evaluation.retrieval import NO_ANSWERS, evaluate_retrieval
    from sirerag.evaluation.trec import write_run
    from sirerag.core.io import write_json
    from sirerag.core.io.guard import GENERATOR, check_cache_dir, check_file_outs
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever
    from sirerag.retrievers.pool_rank import describe

    check_numbers(args)
    outs = check_file_outs({"--json": args.json_out, "--run": args.run, "--plot": args.plot},
                           inputs=[args.index, args.questions, args.beir, args.baseline])
    if args.reader_cache:
        check_cache_dir(args.reader_cache, option="--reader-cache")
    index = load_index(args.index)
    questions = _questions(args, index)
    gold_missing = report_missing_gold(questions, index)
    retriever = load_retriever(args.retriever, index, **retriever_options(args))
    result: dict[str, Any] = {"index": str(index.path), "questions": str(args.questions or args.beir)}
    evaluation = evaluate_retrieval(index.pool, retriever, questions, depth=args.depth,
                                    show_progress=progress_enabled(args))
    result.update(evaluation.to_dict())
    result.update(describe(retriever))  # the retriever and the pool rule (its leaf share and lift ratio) that ranked
    result["pool_entries"] = len(index.pool)
    result.update(gold_missing)
    print_table(result)
    if evaluation.no_answer_excluded == len(questions):
        print(f"  {NO_ANSWERS}")
    if args.run and (run_out := outs["--run"]) is not None:
        lines = write_run(run_out, evaluation.rankings, tag=f"sirerag-{retriever.name}")
        print(f"  TREC run: {lines} lines written to {args.run}")
    if args.reader:
        result.update(_read(args, index, retriever, questions))
    if args.json_out and (json_out := outs["--json"]) is not None:
        write_json(json_out, {"generator": GENERATOR, **result})
    if getattr(args, "plot", None) and (plot_out := outs["--plot"]) is not None:
        from sirerag.report.plots import plot_results

        plot_results([result], plot_out)
        print(f"plot written to {args.plot}")
    return 0


def _questions(args: argparse.Namespace, index: LoadedIndex) -> list[Question]:
    """``--questions`` or ``--beir``; with ``--beir``, the gold ids must be passages of the index."""
    from sirerag.core.errors import InputError
    from sirerag.evaluation.retrieval import load_beir_questions, load_questions

    if not args.beir:
        return load_questions(args.questions, split=args.split, limit=args.limit)
    questions = load_beir_questions(args.beir, split=args.split or "test", limit=args.limit)
    known = {pid for entry in index.pool.entries for pid in entry.passages}
    if not any(pid in known for q in questions for pid in q.gold_passage_ids):
        raise InputError(f"{args.beir}: none of the judged documents is a passage of {args.index}; build the index "
                         f"from {args.beir}/corpus.jsonl (sirerag build keeps BEIR's _id)")
    return questions


def report_missing_gold(questions: Sequence[Question], index: LoadedIndex) -> dict[str, Any]:
    """Count (and say) the gold passage ids that are not passages of the index: they can only be misses."""
    known = {pid for entry in index.pool.entries for pid in entry.passages}
    missing = {q.id: [g for g in q.gold_passage_ids if g not in known] for q in questions}
    missing = {qid: ids for qid, ids in missing.items() if ids}
    n = sum(len(ids) for ids in missing.values())
    if n:
        qid, ids = next(iter(missing.items()))
        total = sum(len(q.gold_passage_ids) for q in questions)
        print(f"warning: {n} of {total} gold passage ids ({len(missing)} of {len(questions)} questions) are not "
              f"passages of {index.path}, e.g. {ids[0]!r} of question {qid!r}; they count as misses "
              "(was the index built from another corpus?)", file=sys.stderr)
    return {"gold_not_in_index": n, "questions_with_gold_not_in_index": len(missing)}


def check_numbers(args: argparse.Namespace) -> None:
    """The numeric options are positive integers (before any index or model is loaded)."""
    from sirerag.core.errors import check

    for option in ("limit", "depth", "top_k", "token_budget"):
        value = getattr(args, option)
        check(value is None or value >= 1, f"--{option.replace('_', '-')}", value, "a positive integer")


def print_table(result: dict[str, Any]) -> None:
    rule = f", pool rule {result['pool_rule']}" if result.get("pool_rule") else ""
    if result.get("leaf_share") is not None:
        lift = result.get("lift_ratio") or 0.0
        rule += f" (leaf share {result['leaf_share']:g}" + (f", lift ratio {lift:g})" if lift else ")")
    print(f"retriever {result['retriever']} on {result['n_questions']} questions "
          f"(pool of {result.get('pool_entries', '?')} entries{rule})")
    for key, value in result.items():
        if "@" in key and not isinstance(value, dict):
            shown = "n/a" if value is None else f"{value:.4f}"
            print(f"  {key:<22} {shown}")
    print(f"  answer_recall over {result['answer_recall_questions']} questions "
          f"({result['yes_no_excluded']} yes/no left out)")
    for key, value in result.items():
        if key.startswith("kind_share@") and value:
            shares = ", ".join(f"{kind} {share:.0%}" for kind, share in value.items())
            print(f"  top-{key.split('@')[1]} slots by kind: {shares}")
    print(f"  latency ms p50 {result['latency_ms_p50']}  p95 {result['latency_ms_p95']}")


def _read(args: argparse.Namespace, index: LoadedIndex, retriever: Any, questions: Any) -> dict[str, Any]:
    """``--reader``: EM/F1/TPQ on this index, and TPER against ``--baseline``."""
    from sirerag.core.config import LLMConfig
    from sirerag.evaluation.qa import efficiency, evaluate_reader
    from sirerag.llm.factory import load_llm
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever

    llm = load_llm(args.reader, config=LLMConfig(), cache_dir=args.reader_cache)
    options = {"top_k": args.top_k, "token_budget": args.token_budget, "show_progress": progress_enabled(args)}
    qa = evaluate_reader(index, retriever, questions, llm, **options)
    out: dict[str, Any] = {"qa": qa.to_dict()}
    _print_qa("reader", out["qa"])
    if args.baseline:
        base = load_index(args.baseline)
        base_retriever = load_retriever(args.retriever, base, **retriever_options(args))
        baseline = evaluate_reader(base, base_retriever, questions, llm, **options)
        out["baseline_qa"] = {**baseline.to_dict(), "index": str(base.path)}
        out["efficiency"] = efficiency(qa, baseline).to_dict()
        _print_qa("baseline", out["baseline_qa"])
        print(f"  TPER vs baseline {out['efficiency']['tper']:.3f} (below 1: time grows slower than the pool)")
    return out


def _print_qa(label: str, qa: dict[str, Any]) -> None:
    context = f"top {qa['top_k']} entries" if "top_k" in qa else f"{qa['token_budget']} tokens"
    print(f"{label} {qa['reader']} ({context}, pool of {qa['pool_size']}): EM {qa['em']:.4f}  F1 {qa['f1']:.4f}  "
          f"TPQ {qa['tpq']:.3f}s (retrieval {qa['retrieval_seconds']:.3f}s + reading {qa['reading_seconds']:.3f}s)")
    if qa["n_failed"] or qa["n_cached"]:
        print(f"  {qa['n_failed']} reader failures (scored 0); {qa['n_cached']} answers from the cache")

"""``sirerag search DIR QUERY``: rank pool entries for one query."""
from __future__ import annotations

import argparse
import json
from typing import Any

from sirerag.cli.common import add_common

RETRIEVER_HELP = "dense (default), bm25, colbert, ppr, or a fusion such as dense+bm25"


def add_retriever_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retriever", default="dense", help=RETRIEVER_HELP)
    p.add_argument("--linking", choices=["ner", "fact"], help="query linking for --retriever ppr (default fact)")
    p.add_argument("--checkpoint", help="ColBERT checkpoint (local path or name) for --retriever colbert")
    p.add_argument("--fact-filter", metavar="LLM_SPEC",
                   help="LLM that filters the retrieved facts of --linking fact (HippoRAG 2's recognition memory)")
    p.add_argument("--passage-weight", type=float,
                   help="--retriever ppr: weight of the dense passage scores in the reset (default 0.05 fact, 0 ner)")


def retriever_options(args: argparse.Namespace) -> dict[str, Any]:
    pairs = (("linking", args.linking), ("checkpoint", args.checkpoint), ("fact_filter", args.fact_filter),
             ("passage_weight", args.passage_weight))
    return {k: v for k, v in pairs if v is not None}


def register(sub: Any) -> None:
    p = sub.add_parser("search", help="search an index", description="Rank the pool entries of an index for a query.")
    p.add_argument("index", help="index directory written by sirerag build")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=10, help="number of entries (default 10)")
    add_retriever_options(p)
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.errors import check
    from sirerag.pool import load_index
    from sirerag.retrievers import load_retriever
    from sirerag.retrievers.base import check_query

    check(args.k >= 1, "-k", args.k, "a positive integer")
    check_query(args.query)
    index = load_index(args.index)
    retriever = load_retriever(args.retriever, index, **retriever_options(args))
    hits = retriever.search(args.query, k=args.k)
    for rank, hit in enumerate(hits, start=1):
        entry = index.pool.get(hit.entry_id)
        if args.json:
            print(json.dumps({"rank": rank, "score": round(hit.score, 6), **entry.to_dict()}, ensure_ascii=False))
            continue
        where = f"{entry.tree}/{entry.kind}/L{entry.level}"
        text = " ".join(entry.text.split())
        print(f"{rank:>3}  {hit.score:8.4f}  {where:<26} {entry.id}  passages={len(entry.passages)}")
        print(f"     {text[:300]}{'…' if len(text) > 300 else ''}")
    if not hits:
        print("no results")
    return 0

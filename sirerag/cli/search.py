"""``sirerag search DIR QUERY``: rank pool entries for a query, or for many with ``--queries``.

``--queries FILE`` (``-`` for stdin) reads one query per line and searches them in
one process and one batch, so a script pays the start-up once; with ``--json`` it
prints one JSON object per query: ``{"line", "query", "hits": [...]}``.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sirerag.cli.common import add_common

RETRIEVER_HELP = ("dense, bm25, colbert, ppr, or a fusion such as dense+bm25 (default: ppr with --linking ner "
                  "when the index has a graph, else dense)")


def add_retriever_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retriever", help=RETRIEVER_HELP)
    p.add_argument("--linking", choices=["ner", "fact"], help="query linking for --retriever ppr (default ner)")
    p.add_argument("--checkpoint", help="ColBERT checkpoint (local path or name) for --retriever colbert")
    p.add_argument("--fact-filter", metavar="LLM_SPEC",
                   help="LLM that filters the retrieved facts of --linking fact (HippoRAG 2's recognition memory)")
    p.add_argument("--passage-weight", type=float,
                   help="--retriever ppr: weight of the passage seeds in the reset (default 0.05)")
    p.add_argument("--fusion", choices=["score", "rrf"], help="fusion of a+b retrievers (default score)")
    p.add_argument("--pool-rule", choices=["passages", "native"],
                   help="over a full pool: passages (summaries and aggregates never push out passages; the "
                        "default) or native (the retriever's own ranking)")
    p.add_argument("--leaf-share", type=float,
                   help="with the passages rule: least share of leaves at every prefix of the ranking (default 0.8 for ppr, 0.9 otherwise)")


def retriever_options(args: argparse.Namespace) -> dict[str, Any]:
    pairs = (("linking", args.linking), ("checkpoint", args.checkpoint), ("fact_filter", args.fact_filter),
             ("passage_weight", args.passage_weight), ("fusion", args.fusion), ("pool_rule", args.pool_rule),
             ("leaf_share", args.leaf_share))
    return {k: v for k, v in pairs if v is not None}


def register(sub: Any) -> None:
    p = sub.add_parser("search", help="search an index", description="Rank the pool entries of an index for a query.")
    p.add_argument("index", help="index directory written by sirerag build")
    p.add_argument("query", nargs="?", help="the query (or --queries)")
    p.add_argument("--queries", metavar="FILE", help="one query per line from FILE, or '-' for stdin; "
                                                     "blank lines are skipped")
    p.add_argument("-k", type=int, default=10, help="number of entries (default 10)")
    add_retriever_options(p)
    p.add_argument("--json", action="store_true",
                   help="print JSON lines instead of a table (one per hit; with --queries one per query)")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.errors import ConfigError, check
    from sirerag.pool import load_index
    from sirerag.retrievers import load_retriever
    from sirerag.retrievers.base import check_query

    check(args.k >= 1, "-k", args.k, "a positive integer")
    if (args.query is None) == (args.queries is None):
        raise ConfigError("give either a QUERY or --queries FILE (one query per line, '-' for stdin), not both")
    if args.queries is None:
        check_query(args.query)
    queries = [(0, args.query)] if args.queries is None else read_queries(args.queries)
    queries = clean_queries(queries)
    index = load_index(args.index)
    retriever = load_retriever(args.retriever, index, **retriever_options(args))
    results = retriever.search_many([q for _, q in queries], k=args.k) if queries else []
    for (line, query), hits in zip(queries, results):
        rows = [{"rank": rank, "score": round(hit.score, 6), **index.pool.get(hit.entry_id).to_dict()}
                for rank, hit in enumerate(hits, start=1)]
        if args.queries is None and args.json:
            for row in rows:
                print(json.dumps(row, ensure_ascii=False))
        elif args.json:
            print(json.dumps({"line": line, "query": query, "hits": rows}, ensure_ascii=False))
        else:
            _print_table(rows, header=f"query (line {line}): {query}" if args.queries is not None else None)
    return 0


def read_queries(source: str) -> list[tuple[int, str]]:
    """``(line number, query)`` for the non-blank lines of ``source`` (a file, or ``-`` for stdin).

    Raises:
        InputError: the file cannot be read.
    """
    from sirerag.errors import InputError

    try:
        text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{source}: cannot read queries: {exc}") from exc
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def clean_queries(queries: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Queries without lone surrogates (bytes that were not UTF-8 on the command line or stdin), with a count."""
    from sirerag.errors import InputError
    from sirerag.io.files import strip_surrogates

    cleaned = [(line, strip_surrogates(query)) for line, query in queries]
    removed = sum(n for _, (_, n) in cleaned)
    if removed:
        print(f"warning: removed {removed} character(s) that are not Unicode text (lone surrogates) from the "
              "queries", file=sys.stderr)
    out = [(line, query) for line, (query, _) in cleaned]
    empty = next((line for line, query in out if not query.strip()), None)
    if empty is not None:
        raise InputError(f"query{f' on line {empty}' if empty else ''} is empty once the characters that are "
                         "not Unicode text are removed")
    return out


def _print_table(rows: list[dict[str, Any]], *, header: str | None) -> None:
    if header:
        print(header)
    for row in rows:
        where = f"{row['tree']}/{row['kind']}/L{row['level']}"
        text = " ".join(row["text"].split())
        print(f"{row['rank']:>3}  {row['score']:8.4f}  {where:<26} {row['id']}  passages={len(row['passages'])}")
        print(f"     {text[:300]}{'…' if len(text) > 300 else ''}")
    if not rows:
        print("no results")

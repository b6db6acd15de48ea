"""``sirerag ask INDEX QUESTION --llm SPEC``: answer a question from an index, with numbered sources.

A thin layer over :meth:`sirerag.Index.ask`: it retrieves the ``-k`` best entries, takes them in rank
order up to ``--token-budget`` tokens and reads them (in rank order, or with ``--order document`` grouped by
document and in their place within it) with the QA reader's prompt (that of ``sirerag eval --reader``), and
prints the answer and the entries it read (title, passage id); ``--json`` prints one JSON object.
"""
from __future__ import annotations

import argparse
import json

from sirerag.cli.common import Subparsers, add_common
from sirerag.cli.search import add_retriever_options, retriever_options


def register(sub: Subparsers) -> None:
    from sirerag.answers import DEFAULT_ANSWER_TOKENS, DEFAULT_TOKEN_BUDGET

    p = sub.add_parser("ask", help="answer a question from an index with an LLM",
                       description="Retrieve the best entries for QUESTION, read them with an LLM (the QA reader's "
                                   "prompt, under a token budget) and print the answer with numbered sources.")
    p.add_argument("index", help="index directory written by sirerag build")
    p.add_argument("question", help="the question")
    p.add_argument("--llm", required=True, metavar="SPEC",
                   help="the reader, e.g. openai:MODEL@http://127.0.0.1:8000/v1 or hf:smollm2")
    p.add_argument("-k", type=int, default=10, help="entries retrieved (default 10)")
    p.add_argument("--token-budget", type=int, default=DEFAULT_TOKEN_BUDGET,
                   help=f"context tokens read at most, in rank order (default {DEFAULT_TOKEN_BUDGET})")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_ANSWER_TOKENS,
                   help=f"completion budget of the answer (default {DEFAULT_ANSWER_TOKENS})")
    p.add_argument("--order", choices=["rank", "document"], default="rank",
                   help="the order the reader reads the entries taken: rank (best first, the default) or document "
                        "(grouped by document, in corpus order, and in their place within it: for a long "
                        "narrative whose order of events matters; summaries and aggregates come last)")
    p.add_argument("--reader-cache", metavar="DIR", help="cache the reader's calls here (default: no cache)")
    p.add_argument("--config", metavar="TOML", help="TOML file whose [llm] section sets the reader (timeouts, "
                                                    "retries, deadline), as build's --config")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="the most seconds the ask waits for the model in all: the endpoint check, the request "
                        "and its retries (llm.deadline; default 600)")
    add_retriever_options(p)
    p.add_argument("--json", action="store_true", help="print the answer and its sources as one JSON object")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from sirerag.api import Index
    from sirerag.core.config import LLMConfig, QueryConfig, load_config
    from sirerag.core.errors import check
    from sirerag.corpus.load import strip_controls
    from sirerag.llm.factory import parse_spec
    from sirerag.retrievers.base import check_query

    check(args.k >= 1, "-k", args.k, "a positive integer")
    check(args.token_budget >= 1, "--token-budget", args.token_budget, "a positive integer")
    check(args.max_tokens >= 1, "--max-tokens", args.max_tokens, "a positive integer")
    check_query(strip_controls(args.question)[0], max_chars=QueryConfig().validate().max_chars)
    parse_spec(args.llm, option="--llm")  # a malformed spec stops before the index is loaded
    llm_config = load_config(args.config).llm if args.config else LLMConfig()
    if args.timeout is not None:
        check(args.timeout > 0, "--timeout", args.timeout, "a positive number of seconds")
        llm_config = replace(llm_config, deadline=args.timeout)
    with Index.load(args.index) as index:
        answer = index.ask(args.question, args.llm, k=args.k, retriever=args.retriever,
                           token_budget=args.token_budget, max_tokens=args.max_tokens,
                           cache_dir=args.reader_cache, llm_config=llm_config, order=args.order,
                           **retriever_options(args))
    print(json.dumps(answer.to_dict(), ensure_ascii=False) if args.json else str(answer))
    return 0

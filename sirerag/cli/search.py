"""``sirerag search DIR QUERY``: rank pool entries for a query, or for many with ``--queries``.

A thin layer over :meth:`sirerag.Index.search_many`. ``--queries FILE`` (or ``-``, as
``--queries -`` or as the QUERY, for stdin) reads one query per line and searches them in one
process and one batch, so a script pays the start-up once; a line that is a JSON object (a
``questions.jsonl`` row) gives its ``question``, ``query`` or ``text`` field. With ``--json`` it
prints one JSON object per query, whether one or many: ``{"line", "id", "query", "retriever",
"pool_rule", "leaf_share", "lift_ratio", "k", "hits": [...]}``.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NamedTuple

from sirerag.cli.common import Subparsers, add_common

RETRIEVER_HELP = ("dense, bm25, colbert, ppr, keyword-graph (over one long document: a book, a story), or a fusion "
                  "such as dense+bm25 (default: ppr when the index has a graph whose titles link passages, else dense)")


def add_retriever_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retriever", help=RETRIEVER_HELP)
    p.add_argument("--checkpoint", help="ColBERT checkpoint (local path or name) for --retriever colbert")
    p.add_argument("--fact-filter", metavar="LLM_SPEC",
                   help="LLM that filters the retrieved facts of --linking fact (HippoRAG 2's recognition memory)")
    from sirerag.core.config.keyword_graph import KEYWORD_GRAPH_MODES, KEYWORD_SOURCES, KeywordGraphConfig

    graph = KeywordGraphConfig()
    p.add_argument("--graph-mode", choices=KEYWORD_GRAPH_MODES,
                   help="--retriever keyword-graph: PageRank from the top dense hits (ppr), the hits and their "
                        f"strongest neighbours (hop), or cosine alone (dense) (default {graph.mode})")
    p.add_argument("--seeds", type=int, help="--retriever keyword-graph: top dense hits the graph search starts "
                                             f"from (default {graph.seeds})")
    p.add_argument("--keywords", choices=KEYWORD_SOURCES,
                   help="--retriever keyword-graph: a passage's keywords: the offline tagger's entities, its "
                        f"non-stopword words, or both (default {graph.keywords})")
    p.add_argument("--fusion", choices=["score", "rrf"], help="fusion of a+b retrievers (default score)")
    p.add_argument("--exact", action="store_true", default=None,
                   help="dense: score every pool entry even when the index has an approximate (HNSW) index")
    add_settings_options(p)


def add_settings_options(p: argparse.ArgumentParser) -> None:
    """One flag per search option of :class:`~sirerag.core.config.retrieval.PPRSettings` (``--passage-weight``,
    ``--bridge-hops``, ``--leaf-share``...): its type, choices, description and default come from the field."""
    from sirerag.core.config.retrieval import PoolRule, choices, doc_of, options

    ppr = p.add_argument_group("ppr settings (--retriever ppr, the default with a graph; docs/ppr.md)")
    pool = p.add_argument_group("pool rule (any retriever, over a pool with summaries or aggregates)")
    others = PoolRule()
    for name, f, default in options():
        in_pool = name in PoolRule.option_names()
        shown = "the graph's" if default is None else f"{default:g}" if isinstance(default, float) else default
        if in_pool and getattr(others, name) != default:
            other = getattr(others, name)
            shown = f"{shown} for ppr, {other:g} otherwise" if isinstance(other, float) else f"{shown} for ppr"
        kwargs: dict[str, Any] = {"help": f"{doc_of(f)} (default {shown})".replace("%", "%%")}
        allowed = choices(f)
        if allowed is not None:
            kwargs["choices"] = list(allowed)
        elif isinstance(f.type, str) and f.type.startswith("bool"):
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = int if str(f.type).startswith("int") else float
        (pool if in_pool else ppr).add_argument("--" + name.replace("_", "-"), **kwargs)


#: retriever options that are no settings field: objects and the other retrievers' options
OTHER_OPTIONS = ("checkpoint", "fact_filter", "fusion", "exact")


def retriever_options(args: argparse.Namespace) -> dict[str, Any]:
    from sirerag.core.config.retrieval import PPRSettings

    names = (*OTHER_OPTIONS, *PPRSettings.option_names())
    options = {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}
    graph = {"mode": getattr(args, "graph_mode", None), "seeds": getattr(args, "seeds", None),
             "keywords": getattr(args, "keywords", None)}  # --retriever keyword-graph
    return options | {k: v for k, v in graph.items() if v is not None}


def register(sub: Subparsers) -> None:
    p = sub.add_parser("search", help="search an index", description="Rank the pool entries of an index for a query.")
    p.add_argument("index", help="index directory written by sirerag build")
    p.add_argument("query", nargs="?", help="the query, or '-' to read one query per line from stdin (or --queries)")
    p.add_argument("--queries", metavar="FILE", help="one query per line from FILE, or '-' for stdin; blank lines "
                                                     "are skipped; JSON lines give their question/query/text field")
    p.add_argument("-k", type=int, default=10, help="number of entries (default 10)")
    add_retriever_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON line per query instead of a table")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.api import Index
    from sirerag.core.errors import ConfigError, check
    from sirerag.retrievers.base import check_query
    from sirerag.retrievers.pool_rank import describe, has_non_leaves

    check(args.k >= 1, "-k", args.k, "a positive integer")
    if (args.query is None) == (args.queries is None):
        raise ConfigError("give either a QUERY or --queries FILE (one query per line, '-' for stdin), not both")
    source = args.queries if args.queries is not None else "-" if args.query == "-" else None
    if source is None:
        check_query(args.query)
    queries = clean_queries([Query(None, None, args.query)] if source is None else read_queries(source))
    with Index.load(args.index) as index:
        options = retriever_options(args)
        results = index.search_many([q.text for q in queries], k=args.k, retriever=args.retriever, **options)
        ranking = describe(index.retriever(args.retriever, **options))
        for query, hits in zip(queries, results):
            rows = [{"rank": rank, **hit.to_dict(), "score": round(hit.score, 6)}
                    for rank, hit in enumerate(hits, start=1)]
            if args.json:
                print(json.dumps({"line": query.line, "id": query.id, "query": query.text, **ranking, "k": args.k,
                                  "hits": rows}, ensure_ascii=False))
            else:
                header = f"query (line {query.line}): {query.text}" if query.line is not None else None
                _print_table(rows, header=header)
        if not args.json and has_non_leaves(index.pool):
            _print_rule_note(ranking)
    return 0


class Query(NamedTuple):
    """A query to search: its line in the input (None for a QUERY argument), its id (from a JSON line), its text."""

    line: int | None
    id: str | None
    text: str


QUERY_FIELDS = ("question", "query", "text")


def read_queries(source: str) -> list[Query]:
    """The queries of the non-blank lines of ``source`` (a file, or ``-`` for stdin). A line holding a JSON
    object (a ``questions.jsonl`` row) gives its ``question``, ``query`` or ``text`` field and its ``id``.

    Raises:
        InputError: the file cannot be read, or a JSON line has none of those fields (naming the line).
    """
    from sirerag.core.errors import InputError

    where = "stdin" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{source}: cannot read queries: {exc}") from exc
    out: list[Query] = []
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if not line.startswith("{"):
            out.append(Query(n, None, line))
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{where}:{n}: a line starting with '{{' must be a JSON object ({exc})") from exc
        field = next((f for f in QUERY_FIELDS if isinstance(row, dict) and isinstance(row.get(f), str)), None)
        if field is None:
            raise InputError(f"{where}:{n}: a JSON line needs a string field {' or '.join(QUERY_FIELDS)}")
        out.append(Query(n, None if row.get("id") is None else str(row["id"]), row[field].strip()))
    return out


def clean_queries(queries: list[Query]) -> list[Query]:
    """Queries without control characters and lone surrogates (bytes that were not UTF-8 on the command line or
    stdin), with a count, each checked against :class:`~sirerag.core.config.QueryConfig`'s ``max_chars``.

    Raises:
        InputError: no query at all (empty stdin or file), a query empty once cleaned, or one too long.
    """
    from sirerag.core.config import QueryConfig
    from sirerag.core.errors import InputError
    from sirerag.corpus.load import strip_controls
    from sirerag.retrievers.base import check_query

    if not queries:
        raise InputError("no query: the input holds no non-blank line (give a QUERY, or one query per line)")
    cleaned = [(query, strip_controls(query.text)) for query in queries]
    removed = sum(n for _, (_, n) in cleaned)
    if removed:
        print(f"warning: removed {removed} character(s) that are not Unicode text (lone surrogates) or are control "
              "characters from the queries", file=sys.stderr)
    out = [query._replace(text=text) for query, (text, _) in cleaned]
    for query in out:
        where = f" on line {query.line}" if query.line is not None else ""
        if not query.text.strip():
            raise InputError(f"query{where} is empty once control characters and lone surrogates are removed")
        check_query(query.text, max_chars=QueryConfig().validate().max_chars, name=f"query{where}")
    return out


def _print_table(rows: list[dict[str, Any]], *, header: str | None) -> None:
    if header:
        print(header)
    for row in rows:
        where = f"{row['tree']}/{row['kind']}/L{row['level']}"
        text = " ".join(row["text"].split())
        if row["kind"] == "leaf":
            name = " > ".join(p for p in (row["title"], row["section"]) if p) or "(untitled)"
            source = f"{name}  [passage {', '.join(row['passages'])}]"
        else:
            label = f"{row['kind']} '{row['title']}'" if row["title"] else row["kind"]
            source = f"{label} over {len(row['passages'])} passage(s)"
        print(f"{row['rank']:>3}  {row['score']:8.4f}  {where:<26} {row['id']}  {source}")
        print(f"     {text[:300]}{'…' if len(text) > 300 else ''}")
    if not rows:
        print("no results")


def _print_rule_note(ranking: dict[str, Any]) -> None:
    if ranking["pool_rule"] == "passages":
        lift = ranking.get("lift_ratio") or 0.0
        lifted = (f"; one held back that scores {lift:g}x the next passage places its best unranked passage "
                  "there") if lift else ""
        print(f"(pool rule 'passages', leaf share {ranking['leaf_share']:g}: a summary or aggregate is placed after "
              f"a passage it covers, so it can rank below passages that score lower{lifted}; --pool-rule native "
              f"shows {ranking['retriever']}'s own order)")
    else:
        print(f"(pool rule 'native': {ranking['retriever']}'s own order)")

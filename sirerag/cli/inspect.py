"""``sirerag inspect DIR --out report.html``: one self-contained HTML report of an index."""
from __future__ import annotations

import argparse

from sirerag.cli.common import Subparsers, add_common, progress_enabled


def register(sub: Subparsers) -> None:
    p = sub.add_parser("inspect", help="write one self-contained HTML report of an index",
                       description="Overview (manifest, Table 3 figures, pool counts), both trees as collapsible "
                                   "hierarchies, aggregates with their propositions, the entity graph around a "
                                   "searched entity, and a search over the pool's texts. The page works offline.")
    p.add_argument("index", help="index directory written by 'sirerag build'")
    p.add_argument("--out", required=True, help="HTML file to write")
    p.add_argument("--entity", action="append", default=[], metavar="NAME",
                   help="entity offered as a shortcut (repeatable); the first is drawn when the page opens")
    p.add_argument("--question", action="append", default=[], metavar="Q",
                   help="question to explain (repeatable): one panel each. With PPR (the default on an index "
                        "with --graph): its linked seed entities, bridged entities and top passages with why they "
                        "ranked; with another retriever: the top entries, their scores and the question's terms "
                        "each holds")
    p.add_argument("--questions", metavar="FILE",
                   help="questions.jsonl (as for 'sirerag eval'): explain its first --limit questions too, with the "
                        "ranks of their gold passages")
    p.add_argument("--limit", type=int, metavar="N", help="with --questions: the first N questions (default 10)")
    p.add_argument("--retriever", help="the retriever that explains the questions: ppr, dense, bm25, colbert or a "
                                       "fusion such as dense+bm25 (default: the index's default retriever)")
    p.add_argument("--max-nodes", type=int, default=60, metavar="N",
                   help="most nodes drawn around an entity (default 60)")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.report.render import write_report

    info = write_report(args.index, args.out, entities=args.entity, max_nodes=args.max_nodes,
                        questions=args.question, questions_file=args.questions, limit=args.limit,
                        retriever=args.retriever, show_progress=progress_enabled(args))
    print(f"wrote {info.path} ({info.bytes / 1e6:.1f} MB: {info.entries} pool entries, {info.tree_nodes} tree nodes, "
          f"{info.graph_edges} graph edges) in {info.seconds:.1f}s")
    return 0

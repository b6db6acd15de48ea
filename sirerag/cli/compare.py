"""``sirerag compare EVAL1.json EVAL2.json ... [--plot out.png]``: several eval results side by side."""
from __future__ import annotations

import argparse

from sirerag.cli.common import Subparsers, add_common


def register(sub: Subparsers) -> None:
    p = sub.add_parser("compare", help="compare 'sirerag eval --json' results (table, optional plot)",
                       description="Print the metrics of several eval results side by side; with --plot also "
                                   "overlay their passage recall@k (k = 1..20) and answer recall@T curves.")
    p.add_argument("results", nargs="+", metavar="EVAL.json", help="files written by 'sirerag eval --json'")
    p.add_argument("--plot", metavar="PNG", help="also draw the curves into this PNG (needs sirerag[plot])")
    p.add_argument("--labels", help="comma list of names for the results (default: retriever on index folder)")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.core.errors import InputError
    from sirerag.core.io.guard import check_file_out
    from sirerag.report.plots import comparison_table, load_results, plot_results

    plot = check_file_out(args.plot, "--plot", inputs=args.results) if args.plot else None
    results = load_results(args.results)
    labels = [s.strip() for s in args.labels.split(",")] if args.labels else None
    if labels is not None and len(labels) != len(results):
        raise InputError(f"--labels: {len(labels)} labels for {len(results)} results")
    print(comparison_table(results, labels))
    if plot is not None:
        plot_results(results, plot, labels)
        print(f"plot written to {args.plot}")
    return 0

"""``sirerag stats DIR``: the paper's Table 3 figures and the pool's make-up for an index."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from sirerag.cli.common import Subparsers, add_common


def register(sub: Subparsers) -> None:
    p = sub.add_parser("stats", help="print an index's statistics (paper Table 3, pool by tree/kind/level)",
                       description="Chunks, propositions, entities, proposition aggregates, propositions per "
                                   "entity (avg/max/min), pool size by tree, kind and level, extraction "
                                   "failures, and the extractor and aggregation rule used.")
    p.add_argument("index", help="index directory written by 'sirerag build'")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.report.stats import format_stats, index_stats

    stats = index_stats(Path(args.index))
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0

"""``sirerag remove INDEX --ids ID... | --ids-file F``: remove documents from an index without rebuilding it."""
from __future__ import annotations

import argparse
from pathlib import Path

from sirerag.cli.add import _update_options, print_report
from sirerag.cli.common import Subparsers, progress_enabled


def register(sub: Subparsers) -> None:
    p = sub.add_parser("remove", help="remove documents from an index without rebuilding it",
                       description="Remove documents (their leaves, propositions and aggregate contributions) "
                                   "and write again only the summaries above them. An id that is not in the index "
                                   "is an error naming it, and nothing changes.")
    p.add_argument("index", help="index directory written by 'sirerag build'")
    ids = p.add_mutually_exclusive_group(required=True)
    ids.add_argument("--ids", nargs="+", metavar="ID", help="document ids to remove")
    ids.add_argument("--ids-file", metavar="FILE", help="a file of document ids, one per line")
    _update_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.core.errors import InputError
    from sirerag.cli.numba_cache import cache_umap_functions
    from sirerag.pipeline.update import update_index

    cache_umap_functions()  # new clusters are clustered with UMAP: reuse its compiled functions

    if args.ids_file:
        path = Path(args.ids_file)
        if not path.is_file():
            raise InputError(f"--ids-file {path}: no such file")
        ids = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not ids:
            raise InputError(f"--ids-file {path}: holds no ids")
    else:
        ids = list(args.ids)
    report = update_index(args.index, remove=ids, cache_dir=args.cache, drift_warn=args.drift_warn,
                          refresh_threshold=args.refresh_threshold, show_progress=progress_enabled(args))
    print_report(report)
    return 0

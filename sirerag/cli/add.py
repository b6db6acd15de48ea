"""``sirerag add INDEX CORPUS``: add (or update) documents of an index without rebuilding it."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from sirerag.cli.common import Subparsers, add_common, add_follow_outside_links, progress_enabled

if TYPE_CHECKING:
    from sirerag.pipeline.update import UpdateReport


def _update_options(p: argparse.ArgumentParser) -> None:
    from sirerag.pipeline.changes import DEFAULT_DRIFT_WARN, DEFAULT_REFRESH_THRESHOLD

    p.add_argument("--cache", help="cache folder for model calls (default INDEX/cache, as for the build)")
    p.add_argument("--drift-warn", type=float, default=DEFAULT_DRIFT_WARN, metavar="SHARE",
                   help="warn when more than this share of the leaves was added or removed since the last "
                        f"full build (default {DEFAULT_DRIFT_WARN})")
    p.add_argument("--refresh-threshold", type=float, default=DEFAULT_REFRESH_THRESHOLD, metavar="SHARE",
                   help="a cluster whose members changed keeps its summary text while the member tokens changed "
                        "since that text was written are at most this share of its members' tokens; 0 rewrites "
                        f"every changed cluster (default {DEFAULT_REFRESH_THRESHOLD})")
    add_common(p)


def register(sub: Subparsers) -> None:
    p = sub.add_parser("add", help="add documents to an index without rebuilding it",
                       description="Add the documents of CORPUS to an index: new documents are chunked, embedded "
                                   "and placed in the existing trees; only the summaries of clusters that change "
                                   "are written again. A document whose id is already there with the same text is "
                                   "skipped; with another text it replaces the old version.")
    p.add_argument("index", help="index directory written by 'sirerag build'")
    p.add_argument("corpus", help=".jsonl of {id?, title?, text} rows, a .json list of them, or a folder of .txt/.md "
                                  "(documents keyed by relative path: an edited file replaces its old text)")
    p.add_argument("--sync", action="store_true",
                   help="CORPUS is a folder: also remove the documents it gave whose files are no longer in it "
                        "(or now empty or skipped)")
    add_follow_outside_links(p)
    _update_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.cli.numba_cache import cache_umap_functions
    from sirerag.pipeline.update import update_index

    cache_umap_functions()  # new clusters are clustered with UMAP: reuse its compiled functions

    report = update_index(args.index, add=args.corpus, cache_dir=args.cache, drift_warn=args.drift_warn,
                          refresh_threshold=args.refresh_threshold, sync=args.sync,
                          follow_outside_links=args.follow_outside_links,
                          show_progress=progress_enabled(args))
    print_report(report)
    return 0


def print_report(report: UpdateReport) -> None:
    """What an add or remove did, in a few lines."""
    c = report.counts
    if not report.changed:
        print(f"{report.out}: unchanged ({c.get('documents_skipped', 0)} document(s) already there with the same text)")
        return
    print(f"{report.out}: {c['documents_added']} document(s) added, {c['documents_updated']} updated, "
          f"{c['documents_removed']} removed, {c['documents_skipped']} unchanged; {c['leaves_added']} leaves added, "
          f"{c['leaves_removed']} removed; {c['summaries_written']} summaries written, "
          f"{c['summaries_stale']} kept stale; "
          f"{c['pool_entries']} pool entries")
    print(f"  drift since the last full build: {report.drift.get('share', 0.0):.1%} of its leaves, "
          f"{report.drift.get('summaries_stale', 0)} stale summaries in the index"
          + (" (past --drift-warn: consider sirerag build)" if report.drift_warning else ""))

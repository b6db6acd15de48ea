"""``sirerag index DIR --colbert CHECKPOINT``: build the search-time indexes a retriever needs.

Building is explicit: ``sirerag search --retriever colbert`` only opens a ColBERT
index built here, and says to run this command when there is none.
"""
from __future__ import annotations

import argparse

from sirerag.cli.common import Subparsers, add_common


def register(sub: Subparsers) -> None:
    p = sub.add_parser("index", help="build a retriever's own index over the pool (ColBERT PLAID)",
                       description="Build the ColBERTv2 PLAID index of an index's pool for one checkpoint and "
                                   "record it in the manifest (up-to-date indexes are kept). See docs/export.md.")
    p.add_argument("index", help="index directory written by 'sirerag build'")
    p.add_argument("--colbert", required=True, metavar="CHECKPOINT",
                   help="ColBERT checkpoint: a local folder or a Hugging Face name (downloaded if not cached)")
    p.add_argument("--nbits", type=int, choices=[1, 2, 4], help="bits per residual dimension (default 2)")
    p.add_argument("--doc-maxlen", type=int, help="ColBERT document length in tokens (default 512)")
    p.add_argument("--rebuild", action="store_true", help="rebuild even if an up-to-date index exists")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds the build may take (default 3600)")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.retrievers.colbert import ensure_colbert_index

    record, built = ensure_colbert_index(args.index, args.colbert, nbits=args.nbits, doc_maxlen=args.doc_maxlen,
                                         rebuild=args.rebuild, timeout=args.timeout)
    if built:
        print(f"ColBERT index of {record['entries']} entries built in {record['build_seconds']} s: "
              f"{args.index}/{record['path']} (nbits={record['nbits']}, doc_maxlen={record['doc_maxlen']}, "
              f"{record.get('truncated', 0)} entries truncated)")
    else:
        print(f"ColBERT index for {args.colbert} is up to date: {args.index}/{record['path']}")
    return 0

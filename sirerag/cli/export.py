"""``sirerag export DIR --format FORMAT --out OUT``: write the pool for other retrievers."""
from __future__ import annotations

import argparse

from sirerag.cli.common import Subparsers, add_common

FORMATS_HELP = ("beir: corpus.jsonl (_id, title, text, metadata); colbert: collection.tsv + pid_to_entry.json; "
                "jsonl: entries.jsonl + embeddings.npy; parquet: entries.parquet with an embedding column "
                "(needs the 'export' extra)")


def register(sub: Subparsers) -> None:
    p = sub.add_parser("export", help="export the retrieval pool (BEIR, ColBERT, JSONL + embeddings, Parquet)",
                       description="Write an index's retrieval pool in a format other retrievers and vector "
                                   "stores read. Every export also holds documents.jsonl (the source passages) "
                                   "and export.json. See docs/export.md for loading each format.")
    p.add_argument("index", help="index directory written by 'sirerag build'")
    p.add_argument("--format", required=True, choices=["beir", "colbert", "jsonl", "parquet"], help=FORMATS_HELP)
    p.add_argument("--out", required=True, help="folder to create (written to a temporary folder, then renamed)")
    p.add_argument("--overwrite", action="store_true", help="replace a previous export in --out")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.pool.export import export_pool

    report = export_pool(args.index, args.out, args.format, overwrite=args.overwrite)
    print(f"exported {report.rows} entries as {report.format} to {report.out}: {', '.join(report.files)}")
    return 0

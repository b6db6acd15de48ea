"""``sirerag verify DIR``: check an index against its manifest (sha256 of every file) and itself."""
from __future__ import annotations

import argparse
import json

from sirerag.cli.common import Subparsers, add_common


def register(sub: Subparsers) -> None:
    p = sub.add_parser("verify", help="check an index's files against its manifest",
                       description="Check the size and sha256 of every file an index's manifest lists, parse "
                                   "every record and check the files against each other. Exit code 1 names "
                                   "the first damaged file.")
    p.add_argument("index", help="index directory written by 'sirerag build'")
    p.add_argument("--json", action="store_true", help="print what was checked as JSON")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.pipeline.verify import verify_index

    report = verify_index(args.index)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.index}: ok ({report['files']} files, {report['bytes']} bytes checked; {report['entries']} entries, "
          f"{report['documents']} documents, {report['chunks']} chunks, {report['propositions']} propositions)")
    if report["unlisted"]:
        print(f"  not listed in the manifest: {', '.join(report['unlisted'])}")
    return 0

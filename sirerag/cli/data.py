"""``sirerag data convert FORMAT INPUT... --out DIR``: public dataset files to sirerag's format."""
from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from sirerag.cli.common import Subparsers, add_common


def register(sub: Subparsers) -> None:
    from sirerag.datasets import FORMATS, TARGETS

    p = sub.add_parser("data", help="convert public datasets (BEIR, MuSiQue, 2Wiki, HotpotQA, HippoRAG)",
                       description="Dataset files to and from sirerag's benchmark format.")
    actions = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    c = actions.add_parser(
        "convert", help="write corpus.jsonl and questions.jsonl from a dataset's own files",
        description="Write corpus.jsonl ({id, title, text}; id = 'p' + sha1(title + newline + text)[:16] after "
                    "white space is collapsed) and questions.jsonl ({id, question, answers, gold_titles, "
                    "gold_passage_ids, source, split, ...}), the format of shared/bench. Inputs per format: "
                    + "; ".join(f"{name}: {m.INPUTS}" for name, m in FORMATS.items()) + ".")
    c.add_argument("format", choices=sorted(FORMATS), help="the inputs' format")
    c.add_argument("inputs", nargs="+", metavar="INPUT", help="the dataset's files (or a BEIR folder)")
    c.add_argument("--out", required=True, help="output folder")
    c.add_argument("--split", help="split written into each question (default: from the file name: dev, train, "
                   "test); for beir, the qrels file read (default test); for sirerag, only that split")
    c.add_argument("--ids", metavar="FILE", help="keep only these questions, in this order, with only their "
                   "paragraphs: a questions.jsonl (its 'id' fields) or a text file with one id per line")
    c.add_argument("--to", choices=TARGETS, default="sirerag", help="output layout: sirerag (corpus.jsonl + "
                   "questions.jsonl, default) or beir (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)")
    add_common(c)
    c.set_defaults(func=run_convert)


def run_convert(args: argparse.Namespace) -> int:
    from sirerag.datasets import convert, write

    from sirerag.core.io.guard import check_dataset_out

    inputs = [*args.inputs, *([args.ids] if args.ids else [])]
    check_dataset_out(args.out, inputs=inputs)  # before any work
    ids = _read_ids(Path(args.ids)) if args.ids else None
    conversion = convert(args.format, args.inputs, split=args.split, ids=ids)
    files = write(conversion, args.out, to=args.to, inputs=inputs)
    print(f"{args.format}: {len(conversion.questions)} questions, {len(conversion.corpus)} passages "
          f"({conversion.merged} repeated paragraphs kept once)")
    for reason, count in conversion.dropped.items():
        print(f"  dropped {count:>6}  {reason}")
    for note in conversion.notes:
        print(f"  note: {note}")
    for path in files:
        print(f"  {path}  sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}")
    return 0


def _read_ids(path: Path) -> list[str]:
    """Ids from a questions.jsonl (``id`` fields) or a plain list (one per line)."""
    from sirerag.core.errors import InputError
    from sirerag.core.io import read_jsonl

    if path.suffix.lower() == ".jsonl":
        ids = []
        for lineno, row in enumerate(read_jsonl(path), start=1):
            if "id" not in row:
                raise InputError(f"{path}: row {lineno} has no 'id' field")
            ids.append(str(row["id"]))
        return ids
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

"""Entry point of the ``sirerag`` console script.

Subcommands are the modules of this package that define ``register(subparsers)``;
each registers its parser and sets ``func(args) -> int``. Heavy modules are
imported inside ``func`` so ``sirerag --help`` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from typing import Sequence

import sirerag
import sirerag.cli
from sirerag.errors import SireragError

ORDER = ["build", "search", "eval", "stats", "verify", "export", "cache", "finetune"]


def _subcommand_modules() -> list[str]:
    names = [m.name for m in pkgutil.iter_modules(sirerag.cli.__path__) if m.name not in ("main", "common")]
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sirerag", description="SiReRAG-style hierarchical retrieval indexes.")
    parser.add_argument("--version", action="version", version=f"sirerag {sirerag.__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors; no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _subcommand_modules():
        module = importlib.import_module(f"sirerag.cli.{name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def _configure_logging(quiet: bool, verbose: bool) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("httpx", "httpcore", "urllib3", "filelock", "numba", "sentence_transformers", "openai", "bm25s",
                  "huggingface_hub", "transformers"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # --quiet/--verbose may be given after the subcommand too
    quiet = bool(getattr(args, "quiet", False) or getattr(args, "sub_quiet", False))
    _configure_logging(quiet, bool(getattr(args, "verbose", False)))
    args.quiet = quiet
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SireragError as exc:
        print(f"sirerag {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"sirerag {args.command}: interrupted; cached model calls are kept for the next run", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

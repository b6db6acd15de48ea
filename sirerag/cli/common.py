"""Helpers shared by subcommands."""
from __future__ import annotations

import argparse

#: what a subcommand's ``register(sub)`` takes: the ``add_subparsers()`` action of the ``sirerag`` parser
Subparsers = argparse._SubParsersAction


def add_common(parser: argparse.ArgumentParser) -> None:
    """Options every subcommand accepts after its name."""
    parser.add_argument("--quiet", dest="sub_quiet", action="store_true", help="only warnings and errors")
    parser.add_argument("--debug", dest="sub_debug", action="store_true", help="show the traceback of an error")


def progress_enabled(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False)


def add_follow_outside_links(parser: argparse.ArgumentParser) -> None:
    """``--follow-outside-links`` (``corpus.follow_outside_links``) for the commands that read a folder."""
    parser.add_argument("--follow-outside-links", action="store_true",
                        help="CORPUS is a folder: also read the files and folders its symbolic links lead to "
                             "outside it (skipped by default, with a warning); hidden entries stay skipped")

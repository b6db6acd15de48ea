"""Entry point of the ``sirerag`` console script.

Subcommands are the modules of this package that define ``register(subparsers)``;
each registers its parser and sets ``func(args) -> int``. Heavy modules are
imported inside ``func`` so ``sirerag --help`` stays fast.

An error a user can cause (a :class:`~sirerag.core.errors.SireragError`, or an
``OSError`` on a path they gave) ends the command with one line on stderr and exit
code 1; ``--debug`` shows the traceback instead.

Commands shipped outside the core (``sirerag finetune`` from ``sirerag_finetune``)
are found through the ``sirerag.commands`` entry point group: each entry names a
``register(subparsers)`` callable. The core never imports those packages by name.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
from importlib.metadata import entry_points
from typing import Callable, Mapping, Sequence

import sirerag
import sirerag.cli
from sirerag.cli.common import Subparsers
from sirerag.cli.numba_cache import configure_numba_cache, configure_onednn_cache
from sirerag.core.errors import SireragError

ORDER = ["build", "add", "remove", "index", "search", "ask", "eval", "compare", "data", "stats", "inspect", "verify", "export", "cache", "finetune"]
#: entry point group of subcommands that live in other packages
COMMANDS_GROUP = "sirerag.commands"

logger = logging.getLogger(__name__)

Register = Callable[[Subparsers], None]


def _subcommand_modules() -> list[str]:
    names = [m.name for m in pkgutil.iter_modules(sirerag.cli.__path__) if m.name not in ("main", "common", "numba_cache")]
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def plugin_commands() -> dict[str, Register]:
    """``{command: register}`` of the installed ``sirerag.commands`` entry points.

    A plugin that fails to load is skipped with a warning, so the core commands keep working.
    """
    commands: dict[str, Register] = {}
    seen: set[str] = set()
    for ep in entry_points(group=COMMANDS_GROUP):
        if ep.name in seen:
            continue  # the same distribution seen twice on sys.path: the first one wins, as for imports
        seen.add(ep.name)
        try:
            commands[ep.name] = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break `sirerag --help`
            logger.warning("sirerag command %r (%s) could not be loaded: %s: %s", ep.name, ep.value,
                           type(exc).__name__, exc)
    return commands


def build_parser(commands: Mapping[str, Register] | None = None) -> argparse.ArgumentParser:
    """The ``sirerag`` parser: built-in subcommands, then ``commands`` (default: the entry points)."""
    parser = argparse.ArgumentParser(prog="sirerag", description="SiReRAG-style hierarchical retrieval indexes.")
    parser.add_argument("--version", action="version", version=f"sirerag {sirerag.__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors; no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    builtin = _subcommand_modules()
    for name in builtin:
        module = importlib.import_module(f"sirerag.cli.{name}")
        if hasattr(module, "register"):
            module.register(sub)
    plugins = plugin_commands() if commands is None else commands
    for name in sorted(plugins, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n)):
        if name in builtin:
            logger.warning("sirerag command %r from an entry point clashes with a built-in one; ignored", name)
            continue
        plugins[name](sub)
    return parser


#: libraries whose log lines below WARNING are not shown
NOISY = ("httpx", "httpx2", "httpcore", "urllib3", "filelock", "numba", "sentence_transformers", "openai", "bm25s",
         "huggingface_hub", "transformers")


class _LibraryFloor(logging.Filter):
    """Drops records of :data:`NOISY` libraries below ``floor``, whatever level a library sets
    on its own logger (bm25s sets DEBUG when it is imported, after the CLI set up logging)."""

    def __init__(self, floor: int) -> None:
        super().__init__()
        self.floor = floor

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.floor or record.name.partition(".")[0] not in NOISY


def _configure_logging(quiet: bool, verbose: bool) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"))
    handler.addFilter(_LibraryFloor(max(level, logging.WARNING)))
    logging.basicConfig(level=level, handlers=[handler])
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def main(argv: Sequence[str] | None = None, *, commands: Mapping[str, Register] | None = None) -> int:
    """Run ``sirerag`` with ``argv``; ``commands`` replaces the entry-point commands (for
    ``python -m sirerag_finetune`` and tests)."""
    parser = build_parser(commands)
    args = parser.parse_args(argv)
    # --quiet/--verbose may be given after the subcommand too
    quiet = bool(getattr(args, "quiet", False) or getattr(args, "sub_quiet", False))
    _configure_logging(quiet, bool(getattr(args, "verbose", False)))
    args.quiet = quiet
    args.debug = bool(getattr(args, "debug", False) or getattr(args, "sub_debug", False))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    configure_numba_cache()  # before anything imports numba: UMAP's compiled code is reused across runs
    configure_onednn_cache()  # before anything imports torch: bounds what torch's CPU kernels keep
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # the reader of our output went away (``sirerag stats --json | head``)
        return _output_closed()
    except (SireragError, OSError) as exc:
        if args.debug:
            raise
        print(f"sirerag {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"sirerag {args.command}: interrupted; cached model calls are kept for the next run", file=sys.stderr)
        return 130


#: exit status of a command whose output pipe was closed by its reader (128 + SIGPIPE, as the shell reports)
EXIT_PIPE_CLOSED = 141


def _output_closed() -> int:
    """Stop quietly when stdout's reader has gone, as other command-line tools do: no error line, and
    stdout pointed at /dev/null so the interpreter's final flush does not complain either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (captured in tests)
        pass
    return EXIT_PIPE_CLOSED


def _one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (an ``OSError`` as ``strerror: filename``)."""
    if isinstance(exc, OSError) and not isinstance(exc, SireragError) and exc.strerror:
        names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
        text = f"{exc.strerror}: {names}" if names else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

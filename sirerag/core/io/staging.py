"""Builds as transactions: stage every index file beside the index, then swap it in.

:func:`staged_index` takes the folder's write lock (:mod:`sirerag.core.io.lock`), checks that
``--out`` may be written (missing, empty, or a sirerag index holding only what sirerag
wrote: :func:`sirerag.core.io.guard.check_index_out`), and yields an empty staging folder ``.<name>.stage-XXXXXXXX`` beside it. When
the build returns, the folder's ``cache/`` (the default home of the model-call caches,
which a killed build must keep) is moved into the staged folder and the staged folder
replaces the index in one swap. Readers see the old index or the new one, never a mix;
files of an earlier build that this build did not write (propositions, graph/, colbert/,
...) are gone with the old folder. A build killed at any point leaves the old index as
it was; the next writer puts a cache left in a staging folder back and deletes the rest.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path
from typing import Iterator

from sirerag.core.io.atomic import make_temp_dir, swap_dir
from sirerag.core.io.guard import check_index_out, refuse_special
from sirerag.core.io.lock import index_lock
from sirerag.core.io.manifest import UNLISTED

logger = logging.getLogger(__name__)

__all__ = ["check_index_out", "checkpoint", "recover", "refuse_special", "staged_index"]


def checkpoint(point: str) -> None:
    """Called at each step of a commit (``carry``, ``swap``, ``swapped``); does nothing.
    Tests replace it to stop a build at a named point."""


def recover(out: Path, keep: tuple[str, ...] = UNLISTED) -> None:
    """Clean up after a writer killed while committing (call it under the lock): put a
    cache left in a staging folder back into ``out``, put back an index renamed away by
    an interrupted two-step swap, and delete the other leftovers."""
    leftovers = sorted(out.parent.glob(f".{out.name}.stage-*")) + sorted(out.parent.glob(f".{out.name}.old-*"))
    for folder in leftovers:
        if not folder.is_dir():
            continue
        if ".old-" in folder.name and not out.exists():
            os.rename(folder, out)
            logger.warning("put back %s, left by an interrupted swap", out)
            continue
        stuck = []
        for name in keep:
            if (folder / name).exists():
                if (out / name).exists():
                    stuck.append(name)
                    continue
                out.mkdir(parents=True, exist_ok=True)
                os.rename(folder / name, out / name)
                logger.info("recovered %s from an interrupted build", out / name)
        if stuck:
            logger.warning("left %s in place: it holds %s and so does %s", folder, ", ".join(stuck), out)
        else:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def staged_index(out: str | Path, *, command: str = "build", keep: tuple[str, ...] = UNLISTED,
                 inputs: tuple[str | Path | None, ...] = (), option: str = "--out") -> Iterator[Path]:
    """Hold ``out``'s lock and yield an empty staging folder; on success it replaces ``out``.

    Args:
        out: the index folder to (re)write.
        command: shown to a second writer that finds the lock taken.
        keep: top-level folders of ``out`` moved into the new index (the caches).
        inputs: the command's inputs, which ``out`` may not be, hold or lie in.
        option: the argument ``out`` came from, named in messages (``INDEX`` of ``add``/``remove``).

    Raises:
        ConfigError: ``out`` may not be replaced (see :func:`check_index_out`).
        IndexLockedError: another process is writing ``out``.
    """
    out = check_index_out(out, keep=keep, inputs=inputs, option=option, command=command)  # symlinks resolved
    with index_lock(out, command):
        recover(out, keep)
        check_index_out(out, keep=keep, inputs=inputs, option=option, command=command)
        stage = make_temp_dir(out, "stage")
        carried: list[str] = []
        swapped = False
        try:
            yield stage
            checkpoint("carry")
            for name in keep:
                if (out / name).exists():
                    os.rename(out / name, stage / name)
                    carried.append(name)
            checkpoint("swap")
            old = swap_dir(stage, out)
            swapped = True
            checkpoint("swapped")
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if not swapped:
                for name in carried:  # the swap failed: the caches go back where they were
                    os.rename(stage / name, out / name)
                shutil.rmtree(stage, ignore_errors=True)

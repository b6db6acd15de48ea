"""Killing a sirerag command at a named point: the shared driver of the SIGKILL tests.

A command runs as ``python -c driver(patches, run) POINT ARGS...``: :data:`PRELUDE` defines
``halt(point)``, which prints ``STOPPED AT <point>`` and sleeps when ``point`` is the one
asked for, routes the commit's ``checkpoint`` through it (points ``commit:<name>``) and
defines ``on_stage``, the stage hook of the pipeline's public functions (points
``start:<stage>`` and ``end:<stage>``); ``patches`` adds the test's own points; ``run``
then runs the command (default :data:`RUN`: the CLI with ARGS; :data:`BUILD` and
:data:`ADD`: ``build_index`` and ``update_index`` with ``on_stage``). The test waits for
the line (:func:`stop_at`) and kills the process (:func:`kill`). Nothing here is timed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PRELUDE = r"""
import sys, time
stop = sys.argv[1]

def halt(point):
    if point == stop:
        print("STOPPED AT", point, flush=True)
        time.sleep(3600)

import sirerag.core.io.staging as staging
staging.checkpoint = lambda point: halt("commit:" + point)

def on_stage(name, event, seconds):
    halt(event + ":" + name)
"""
RUN = r"""
from sirerag.cli.main import main
sys.exit(main(sys.argv[2:]))
"""
#: ARGS = CORPUS OUT SEED: ``build_index`` with the default settings but the seed (``sirerag build CORPUS --out OUT
#: --seed SEED`` builds the same index).
BUILD = r"""
from pathlib import Path
from sirerag.core.config import BuildConfig
from sirerag.pipeline.build import build_index
corpus, out, seed = sys.argv[2:]
build_index(Path(corpus), Path(out), BuildConfig(seed=int(seed)), show_progress=False, on_stage=on_stage)
"""
#: ARGS = INDEX CORPUS: ``update_index`` adding CORPUS (what ``sirerag add INDEX CORPUS`` does).
ADD = r"""
from sirerag.pipeline.update import update_index
update_index(sys.argv[2], add=sys.argv[3], on_stage=on_stage)
"""


def driver(patches: str = "", run: str = RUN) -> str:
    """The driver program: the prelude, the test's patches, then the command."""
    return PRELUDE + patches + run


def start(program: str, stop: str, args: list[str]) -> subprocess.Popen:
    """Run ``sirerag ARGS`` under ``program``, to halt at ``stop`` (``never``: run to the end)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    err = tempfile.TemporaryFile()  # a file, not a pipe: a chatty command never blocks on it
    proc = subprocess.Popen([sys.executable, "-c", program, stop, *args], stdout=subprocess.PIPE, stderr=err,
                            text=True, env=env, cwd=ROOT)
    proc.errfile = err  # type: ignore[attr-defined]
    return proc


def stderr(proc: subprocess.Popen) -> str:
    proc.errfile.seek(0)
    return proc.errfile.read().decode("utf-8", "replace")


def stop_at(proc: subprocess.Popen, point: str) -> None:
    """Wait until the command reports it is sleeping at ``point`` (it would exit otherwise)."""
    line = proc.stdout.readline()
    assert line.strip() == f"STOPPED AT {point}", (line, stderr(proc) if proc.poll() is not None else "")


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    close(proc)


def close(proc: subprocess.Popen) -> None:
    proc.stdout.close()
    proc.errfile.close()


def index_files(index: Path) -> dict[str, bytes]:
    """Every file of an index but its cache, by relative path."""
    return {p.relative_to(index).as_posix(): p.read_bytes() for p in sorted(index.rglob("*"))
            if p.is_file() and p.relative_to(index).parts[0] != "cache"}

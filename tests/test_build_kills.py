"""A rebuild killed with SIGKILL at every stage boundary, mid-stage and mid-commit leaves the
old index loadable and consistent, keeps the cache, and the rerun is byte-identical to a clean
build; two builds into one folder: one wins, the other gets the lock message; a reader polling
``load_index`` during a rebuild never sees a mix (issue 11).

Builds run as subprocesses of ``python -c DRIVER``: the driver replaces the build's stage
timer and the commit's ``checkpoint`` with a hook that prints ``STOPPED AT <point>`` and
sleeps at the named point; the test then kills it. Nothing here is timed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from sirerag.cli.main import main
from sirerag.errors import IndexFormatError
from sirerag.pipeline.verify import verify_index
from sirerag.pool import load_index

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

DRIVER = r"""
import sys, time
stop = sys.argv[1]

def halt(point):
    if point == stop:
        print("STOPPED AT", point, flush=True)
        time.sleep(3600)

import sirerag.io.staging as staging
import sirerag.pipeline.build as build
from sirerag.embedding.cache import EmbeddingCache

enter = build._Timer.__enter__
build._Timer.__enter__ = lambda self: (halt("stage:" + self.name), enter(self))[1]
staging.checkpoint = lambda point: halt("commit:" + point)
put, save_pool = EmbeddingCache.put, build.save_pool
EmbeddingCache.put = lambda self, *a, **k: (put(self, *a, **k), halt("mid:embed"))[0]
build.save_pool = lambda *a, **k: (save_pool(*a, **k), halt("mid:write"))[0]
from sirerag.cli.main import main
sys.exit(main(sys.argv[2:]))
"""
KILL_POINTS = ["stage:load", "mid:embed", "stage:embed_leaves", "stage:similarity_tree", "stage:extraction",
               "stage:relatedness_tree", "mid:write", "commit:carry", "commit:swap"]
SETTINGS = ["--quiet", "--seed", "7"]


def _corpus(path: Path, start: int, n: int = 30) -> Path:
    lines = (ROOT / "data" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[start:start + n]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _start(corpus: Path, out: Path, stop: str = "never") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    err = tempfile.TemporaryFile()  # a file, not a pipe: a chatty build never blocks on it
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, stop, "build", str(corpus), "--out", str(out), *SETTINGS],
                            stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=ROOT)
    proc.errfile = err  # type: ignore[attr-defined]
    return proc


def _stderr(proc: subprocess.Popen) -> str:
    proc.errfile.seek(0)
    return proc.errfile.read().decode("utf-8", "replace")


def _stop_at(proc: subprocess.Popen, point: str) -> None:
    """Wait until the build reports it is sleeping at ``point`` (it would exit otherwise)."""
    line = proc.stdout.readline()
    assert line.strip() == f"STOPPED AT {point}", (line, _stderr(proc) if proc.poll() is not None else "")


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.errfile.close()


def _snapshot(index: Path) -> dict[str, bytes]:
    """Every file of an index but the cache, with the manifest's timings left out."""
    files = {p.relative_to(index).as_posix(): p.read_bytes() for p in sorted(index.rglob("*"))
             if p.is_file() and p.relative_to(index).parts[0] != "cache"}
    manifest = json.loads(files.pop("manifest.json"))
    manifest.pop("timings")
    files["manifest.json"] = json.dumps(manifest, sort_keys=True).encode()
    return files


def _consistent(index: Path) -> set[str]:
    """Load the index, check it completely; returns its document ids."""
    loaded = load_index(index)
    verify_index(index)
    docs = {d.id for d in loaded.documents()}
    assert all(p in docs for e in loaded.pool.entries for p in e.passages)
    return docs


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("kills")
    old, new = _corpus(root / "old.jsonl", 0), _corpus(root / "new.jsonl", 30)
    reference = root / "reference"  # one clean build of the new corpus, shared by every check
    assert main(["build", str(new), "--out", str(reference), *SETTINGS]) == 0
    return root, old, new, _snapshot(reference)


def test_killed_rebuilds_leave_the_old_index_and_resume_byte_identical(corpora):
    root, old, new, reference = corpora
    index = root / "index"
    assert main(["build", str(old), "--out", str(index), *SETTINGS]) == 0
    old_snapshot, old_docs = _snapshot(index), _consistent(index)
    for point in KILL_POINTS:
        proc = _start(new, index, point)
        _stop_at(proc, point)
        assert _consistent(index) == old_docs, point  # during the run
        _kill(proc)
        assert _snapshot(index) == old_snapshot, point  # after the kill: the old index, untouched
        assert _consistent(index) == old_docs
        assert (index / "cache" / "embeddings").is_dir() or point.startswith("commit:"), point
    proc = _start(new, index)  # the rerun puts back a cache a commit-time kill left in the stage
    assert proc.wait() == 0, _stderr(proc)
    proc.stdout.close(), proc.errfile.close()
    assert _snapshot(index) == reference
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".index")) == [".index.lock"]
    assert (index / "cache" / "embeddings").is_dir()


def test_a_kill_after_the_swap_leaves_the_new_index(corpora):
    root, old, new, reference = corpora
    index = root / "swapped"
    assert main(["build", str(old), "--out", str(index), *SETTINGS]) == 0
    proc = _start(new, index, "commit:swapped")
    _stop_at(proc, "commit:swapped")
    _kill(proc)
    assert _snapshot(index) == reference and (index / "cache").is_dir()
    _consistent(index)
    assert main(["build", str(new), "--out", str(index), *SETTINGS]) == 0  # cleans the leftover old folder
    assert _snapshot(index) == reference
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".swapped")) == [".swapped.lock"]


def test_two_builds_into_one_folder_one_gets_the_lock_message(corpora, capsys):
    root, old, new, _ = corpora
    index = root / "contended"
    proc = _start(old, index, "stage:embed_leaves")
    _stop_at(proc, "stage:embed_leaves")
    assert main(["build", str(new), "--out", str(index), *SETTINGS]) == 1
    err = capsys.readouterr().err
    assert f"{index} is being written by pid {proc.pid} (started " in err
    _kill(proc)
    assert not index.joinpath("manifest.json").exists()  # nothing was committed


def test_a_reader_polling_during_a_rebuild_never_sees_a_mix(corpora):
    root, old, new, reference = corpora
    index = root / "polled"
    assert main(["build", str(old), "--out", str(index), *SETTINGS]) == 0
    seen: dict[str, int] = {"old": 0, "new": 0, "reloaded": 0}
    old_ids = {json.loads(line)["id"] for line in old.read_text().splitlines()}
    new_ids = {json.loads(line)["id"] for line in new.read_text().splitlines()}
    done = threading.Event()
    failures: list[BaseException] = []

    def poll() -> None:
        try:
            _poll()
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    def _poll() -> None:
        while not done.is_set():
            try:
                loaded = load_index(index)
                docs = {d.id for d in loaded.documents()}
            except IndexFormatError as exc:  # swapped between load and documents(): an error, not a mix
                assert "was rebuilt since it was loaded" in str(exc), exc
                seen["reloaded"] += 1
                continue
            passages = {p for e in loaded.pool.entries for p in e.passages}
            assert docs in (old_ids, new_ids) and passages <= docs
            seen["old" if docs == old_ids else "new"] += 1

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        proc = _start(new, index, "commit:swapped")  # stop after the swap: the reader sees the new index
        _stop_at(proc, "commit:swapped")
        while seen["new"] == 0 and reader.is_alive():
            done.wait(0.05)
    finally:
        done.set()
        reader.join()
    _kill(proc)
    assert not failures, failures
    assert seen["old"] > 0 and seen["new"] > 0
    assert _snapshot(index) == reference

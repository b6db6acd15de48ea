"""A rebuild killed with SIGKILL at every stage boundary, mid-stage and mid-commit leaves the
old index loadable and consistent, keeps the cache, and the rerun is byte-identical to a clean
build; two builds into one folder: one wins, the other gets the lock message; a reader polling
``load_index`` during a rebuild never sees a mix (issue 11). The kill matrix is one test per kill point, each on
its own copy of one old index; the reader waits for what it must see (events), never for time.

Builds run as subprocesses of ``python -c DRIVER``: the driver calls ``build_index`` with an
``on_stage`` hook, and routes the commit's ``checkpoint`` and the embedding cache's writes
through a hook, that prints ``STOPPED AT <point>`` and sleeps at the named point (the start
or end of a stage of the build plan, mid-stage, a step of the commit); the test then kills
it. Nothing here is timed.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path

import _kills as kills
import pytest

from sirerag.cli.main import main
from sirerag.core.errors import IndexFormatError
from sirerag.pipeline.verify import verify_index
from sirerag.pool.loaded import load_index

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

DRIVER = kills.driver(r"""
from sirerag.embedding.cache import EmbeddingCache

put = EmbeddingCache.put
EmbeddingCache.put = lambda self, *a, **k: (put(self, *a, **k), halt("mid:embed"))[0]
""", run=kills.BUILD)
# end:pool: the pool's files are written into the staging folder, the index is not committed
KILL_POINTS = ["start:load", "mid:embed", "start:embed_leaves", "start:similarity_tree", "start:extraction",
               "start:relatedness_tree", "end:pool", "commit:carry", "commit:swap"]
SEED = 7
SETTINGS = ["--quiet", "--seed", str(SEED)]  # what the driver builds with (kills.BUILD)


def _corpus(path: Path, start: int, n: int = 30) -> Path:
    lines = (ROOT / "data" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[start:start + n]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _start(corpus: Path, out: Path, stop: str = "never") -> subprocess.Popen:
    return kills.start(DRIVER, stop, [str(corpus), str(out), str(SEED)])


_stderr, _stop_at, _kill = kills.stderr, kills.stop_at, kills.kill


def _untimed(value: object) -> object:
    """``value`` without the measured times and memory (``timings``, ``seconds``, ``cpu_seconds_*``, ``resources``)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if "seconds" not in k and k not in ("timings", "resources")}
    return [_untimed(v) for v in value] if isinstance(value, list) else value


def _snapshot(index: Path) -> dict[str, bytes]:
    """Every file of an index but the cache; the manifest without its measured times."""
    files = kills.index_files(index)
    manifest = json.loads(files.pop("manifest.json"))
    files["manifest.json"] = json.dumps(_untimed(manifest), sort_keys=True).encode()
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


class _Reader(threading.Thread):
    """Polls ``load_index`` + ``documents()`` and checks every read's documents against its entries.

    ``saw[name]`` is set once a read has seen the corpus ``name`` whole, so a test waits for events, not time."""

    def __init__(self, index: Path, corpora: dict[str, set[str]]) -> None:
        super().__init__(daemon=True)
        self.index, self.corpora = index, corpora
        self.seen = dict.fromkeys([*corpora, "reloaded"], 0)
        self.saw = {name: threading.Event() for name in corpora}
        self.failures: list[BaseException] = []
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.is_set():
                try:
                    loaded = load_index(self.index)
                    docs = {d.id for d in loaded.documents()}
                except IndexFormatError as exc:  # swapped between load and documents(): an error, not a mix
                    assert "was rebuilt since it was loaded" in str(exc), exc
                    self.seen["reloaded"] += 1
                    continue
                name = next(n for n, ids in self.corpora.items() if ids == docs)  # StopIteration: a mix
                assert {p for e in loaded.pool.entries for p in e.passages} <= docs
                self.seen[name] += 1
                self.saw[name].set()
                self.done.wait(0.05)  # pacing only: leave the build its share of the CPU
        except BaseException as exc:  # reported by the test
            self.failures.append(exc)
            for event in self.saw.values():
                event.set()  # wake a waiting test: it reports the failure

    def wait_for(self, name: str) -> None:
        """Block until a read has seen corpus ``name`` (generous bound: a reader that never gets there fails)."""
        assert self.saw[name].wait(900) and not self.failures, (name, self.seen, self.failures)

    def stop(self) -> dict[str, int]:
        self.done.set()
        self.join()
        assert not self.failures, self.failures
        return self.seen


def _ids(corpus: Path) -> set[str]:
    return {json.loads(line)["id"] for line in corpus.read_text().splitlines()}


@pytest.fixture(scope="module")
def old_index(corpora):
    """One build of the old corpus; each test works on its own copy of it."""
    root, old, _, _ = corpora
    index = root / "old-index"
    assert main(["build", str(old), "--out", str(index), *SETTINGS]) == 0
    return index, _snapshot(index), _consistent(index)


def _copy(old_index, tmp_path: Path) -> Path:
    index = tmp_path / "index"
    shutil.copytree(old_index[0], index)
    return index


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_rebuild_killed_at_a_point_leaves_the_old_index_and_its_cache(corpora, old_index, tmp_path, point):
    """The kill matrix, one test per point: during the run and after SIGKILL the old index is untouched."""
    _, _, new, _ = corpora
    index, old_snapshot, old_docs = _copy(old_index, tmp_path), old_index[1], old_index[2]
    proc = _start(new, index, point)
    _stop_at(proc, point)
    assert _consistent(index) == old_docs  # during the run
    _kill(proc)
    assert _snapshot(index) == old_snapshot  # after the kill: the old index, untouched
    assert _consistent(index) == old_docs
    assert (index / "cache" / "embeddings").is_dir() or point == "commit:swap"


def test_a_reader_sees_old_then_new_and_the_killed_rebuild_resumes_byte_identical(corpora, old_index, tmp_path):
    """A reader polls all along and never sees a mix; killed after the swap the new index is complete; a build
    killed mid-write and then rerun cleans up and writes the same bytes as a clean build."""
    _, old, new, reference = corpora
    index = _copy(old_index, tmp_path)
    reader = _Reader(index, {"old": _ids(old), "new": _ids(new)})
    reader.start()
    reader.wait_for("old")
    proc = _start(new, index, "end:pool")  # leaves a staging folder behind
    _stop_at(proc, "end:pool")
    _kill(proc)
    proc = _start(new, index, "commit:swapped")  # killed after the swap: the new index is complete
    _stop_at(proc, "commit:swapped")
    _kill(proc)
    assert _snapshot(index) == reference and (index / "cache" / "embeddings").is_dir()
    reader.wait_for("new")
    reader.stop()
    assert _consistent(index) == _ids(new)
    proc = _start(new, index)  # the rerun cleans up what the kills left and rewrites the same index
    assert proc.wait() == 0, _stderr(proc)
    kills.close(proc)
    assert _snapshot(index) == reference
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".index")) == [".index.lock"]
    assert (index / "cache" / "embeddings").is_dir()


def test_two_builds_into_one_folder_one_gets_the_lock_message(corpora, capsys):
    root, old, new, _ = corpora
    index = root / "contended"
    proc = _start(old, index, "start:embed_leaves")
    _stop_at(proc, "start:embed_leaves")
    assert main(["build", str(new), "--out", str(index), *SETTINGS]) == 1
    err = capsys.readouterr().err
    assert f"{index} is being written by pid {proc.pid} (started " in err
    _kill(proc)
    assert not index.joinpath("manifest.json").exists()  # nothing was committed

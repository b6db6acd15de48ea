"""Index folders are written as transactions under a lock, never replace what sirerag did not
write, and report every damaged file (issue 11). Fast: hand-made indexes, no model."""
from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import numpy as np
import pytest

from sirerag.cli.main import main
from sirerag.core.errors import CacheError, ConfigError, IndexFormatError, IndexLockedError
from sirerag.pool.export import export_pool
from sirerag.core.io import atomic_path, index_lock, write_jsonl, write_manifest
from sirerag.core.io.staging import staged_index
from sirerag.pool.store import DOCUMENTS, load_pool, save_pool
from sirerag.pool.loaded import load_index
from sirerag.core.types import Node, Pool


def make_index(directory: Path, n: int = 6, seed: int = 0) -> Path:
    """A small but complete index: documents, entries over them, embeddings, manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    docs = [{"id": f"d{seed}-{i}", "title": f"T{i}", "text": f"passage {i} of corpus {seed}"} for i in range(n)]
    entries = tuple(Node(id=Node.make_id("leaf", "similarity", 0, d["text"]), text=d["text"], kind="leaf",
                         tree="similarity", level=0, passages=(d["id"],)) for d in docs)
    vectors = np.random.default_rng(seed).normal(size=(n, 8)).astype(np.float32)
    save_pool(directory, Pool(entries=entries, embeddings=vectors))
    write_jsonl(directory / DOCUMENTS, docs)
    write_manifest(directory, embedder={"spec": "st:test", "dim": 8}, components={"pool": {"type": "pool"}})
    return directory


# --- the lock -------------------------------------------------------------------------

def test_a_second_writer_fails_at_once_with_the_holder(tmp_path):
    target = tmp_path / "idx"
    with index_lock(target, "build"):
        with pytest.raises(IndexLockedError, match=r"idx is being written by pid \d+ \(started .*sirerag build\)"):
            with index_lock(target, "export"):
                pass
        load_index(make_index(tmp_path / "other"))  # readers never take the lock
    with index_lock(target):  # released
        pass
    assert (tmp_path / ".idx.lock").is_file() and not target.exists()


def test_build_and_export_refuse_a_locked_folder(tmp_path, capsys):
    source = make_index(tmp_path / "src")
    with index_lock(tmp_path / "out"):
        assert main(["export", str(source), "--format", "jsonl", "--out", str(tmp_path / "out")]) == 1
        assert "is being written by pid" in capsys.readouterr().err
        with pytest.raises(IndexLockedError, match="is being written by pid"):
            with staged_index(tmp_path / "out"):
                pass
    assert not (tmp_path / "out").exists()


# --- the staged swap ------------------------------------------------------------------

def test_a_rebuild_replaces_every_file_and_keeps_the_cache(tmp_path):
    out = make_index(tmp_path / "idx", seed=1)
    (out / "propositions.jsonl").write_text("{}\n")  # optional files of an earlier build
    (out / "graph").mkdir()
    (out / "graph" / "graph.json").write_text("{}")
    write_manifest(out, components={})
    (out / "cache" / "embeddings").mkdir(parents=True)
    (out / "cache" / "embeddings" / "x.sqlite").write_bytes(b"cached")
    with staged_index(out) as stage:
        make_index(stage, seed=2)
        assert load_index(out).pool.entries[0].passages == ("d1-0",)  # readers still see the old one
    assert sorted(p.name for p in out.iterdir()) == ["cache", "documents.jsonl", "embeddings.npy", "entries.jsonl",
                                                     "entry_ids.npy", "entry_lines.npy", "manifest.json"]
    assert load_index(out).pool.entries[0].passages == ("d2-0",)
    assert (out / "cache" / "embeddings" / "x.sqlite").read_bytes() == b"cached"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".idx.lock", "idx"]  # no stage or old folder left


def test_a_failed_build_leaves_the_old_index_and_its_cache(tmp_path, monkeypatch):
    import sirerag.core.io.staging as staging

    out = make_index(tmp_path / "idx", seed=1)
    (out / "cache").mkdir()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def fail(point):
        if point == "swap":
            raise OSError("disk full")

    monkeypatch.setattr(staging, "checkpoint", fail)
    with pytest.raises(OSError, match="disk full"):
        with staged_index(out) as stage:
            make_index(stage, seed=2)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert (out / "cache").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".idx.lock", "idx"]


def test_a_cache_left_in_a_killed_stage_is_recovered(tmp_path):
    out = make_index(tmp_path / "idx", seed=1)
    stage = tmp_path / ".idx.stage-0badc0de"  # what a build killed between moving the cache and the swap leaves
    make_index(stage, seed=2)
    (stage / "cache").mkdir()
    (stage / "cache" / "calls.sqlite").write_bytes(b"progress")
    with staged_index(out) as new:
        assert (out / "cache" / "calls.sqlite").read_bytes() == b"progress" and not stage.exists()
        make_index(new, seed=3)
    assert (out / "cache" / "calls.sqlite").read_bytes() == b"progress"


# --- never replace what sirerag did not write -------------------------------------------

def test_out_must_be_missing_empty_or_a_sirerag_index(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "documents.jsonl").write_text("my own notes\n")
    with pytest.raises(ConfigError, match=r"not a sirerag index; it holds files sirerag did not write \(documents"):
        with staged_index(mine):
            pass
    assert (mine / "documents.jsonl").read_text() == "my own notes\n"
    (mine / "manifest.json").write_text("{}")
    with pytest.raises(ConfigError, match="is not a sirerag index"):
        with staged_index(mine):
            pass
    index = make_index(tmp_path / "idx")
    (index / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"a sirerag index that also holds files sirerag did not write \(notes.txt\)"):
        with staged_index(index):
            pass
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is an existing file, not a folder"):
        with staged_index(tmp_path / "file"):
            pass
    monkeypatch.setenv("HOME", str(mine))
    with pytest.raises(ConfigError, match="is your home folder"):
        with staged_index(mine):
            pass
    monkeypatch.chdir(index)
    with pytest.raises(ConfigError, match="is the current folder"):
        with staged_index("."):
            pass
    with pytest.raises(ConfigError, match="is the file-system root"):
        with staged_index("/"):
            pass
    assert (index / "notes.txt").read_text() == "mine" and (mine / "documents.jsonl").is_file()


def test_cli_build_refuses_a_user_folder_and_a_file(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    write_jsonl(corpus, [{"title": "A", "text": "Alpha is a town."}])
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "documents.jsonl").write_text("keep")
    assert main(["build", str(corpus), "--out", str(mine), "--trees", "none"]) == 1
    assert "files sirerag did not write (documents.jsonl)" in capsys.readouterr().err
    assert main(["build", str(corpus), "--out", str(corpus), "--trees", "none"]) == 1
    assert "is an existing file, not a folder" in capsys.readouterr().err
    assert (mine / "documents.jsonl").read_text() == "keep" and sorted(os.listdir(mine)) == ["documents.jsonl"]


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_export_overwrite_deletes_only_its_own_exports(tmp_path, monkeypatch):
    source = make_index(tmp_path / "E" / "myindex")
    home = tmp_path / "home"  # a fake home folder with an export.json holding {}
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("secret")
    (home / "projects").mkdir()
    (home / "export.json").write_text("{}")
    before = _tree(tmp_path)
    with pytest.raises(ConfigError, match="not a sirerag export"):
        export_pool(source, home, "jsonl", overwrite=True)
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(ConfigError, match="is your home folder"):
        export_pool(source, home, "jsonl", overwrite=True)
    for out in (tmp_path / "E", source, source / "sub"):  # around, equal to, inside the source
        with pytest.raises(ConfigError, match="is the source index, inside it or around it"):
            export_pool(source, out, "jsonl", overwrite=True)
    assert _tree(tmp_path) == before
    export_pool(source, tmp_path / "x", "beir")
    (tmp_path / "x" / "my_notes.md").write_text("added by the user")
    with pytest.raises(ConfigError, match=r"holds files its export.json does not list \(my_notes.md\)"):
        export_pool(source, tmp_path / "x", "jsonl", overwrite=True)
    assert (tmp_path / "x" / "my_notes.md").read_text() == "added by the user"
    (tmp_path / "x" / "my_notes.md").unlink()
    export_pool(source, tmp_path / "x", "jsonl", overwrite=True)  # a clean export is replaced
    assert (tmp_path / "x" / "embeddings.npy").is_file()


def test_cli_export_into_the_source_parent_deletes_nothing(tmp_path, capsys):
    source = make_index(tmp_path / "E" / "myindex")
    before = _tree(tmp_path / "E")
    assert main(["export", str(source), "--format", "beir", "--out", str(tmp_path / "E"), "--overwrite"]) == 1
    assert "the source index, inside it or around it" in capsys.readouterr().err
    assert _tree(tmp_path / "E") == before
    load_index(source)


# --- the manifest is the commit record --------------------------------------------------

def test_manifest_lists_every_file_with_size_sha256_and_rows(tmp_path):
    index = make_index(tmp_path / "idx")
    files = json.loads((index / "manifest.json").read_text())["files"]
    assert sorted(files) == ["documents.jsonl", "embeddings.npy", "entries.jsonl", "entry_ids.npy", "entry_lines.npy"]
    assert files["entries.jsonl"]["rows"] == 6 and files["embeddings.npy"]["shape"] == [6, 8]
    assert files["entry_lines.npy"]["shape"] == [6, 3] and len(files["entries.jsonl"]["sample_sha256"]) == 64
    assert files["embeddings.npy"]["dtype"] == "float32"
    assert files["documents.jsonl"]["size"] == (index / "documents.jsonl").stat().st_size
    assert len(files["documents.jsonl"]["sha256"]) == 64


def _swap_lines(path: Path, i: int, j: int) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[i], lines[j] = lines[j], lines[i]
    path.write_bytes(b"\n".join(lines))


def test_swapped_entry_lines_are_an_error_not_a_wrong_answer(tmp_path, capsys):
    index = make_index(tmp_path / "idx")
    _swap_lines(index / "entries.jsonl", 0, 1)
    with pytest.raises(IndexFormatError, match=r"entries.jsonl: content does not match the manifest.*sirerag verify"):
        load_index(index)
    assert main(["search", str(index), "passage 1", "--retriever", "bm25"]) == 1
    assert "entries.jsonl: content does not match" in capsys.readouterr().err


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_bytes(p.read_bytes()[:-16]), r"embeddings.npy: size \d+ bytes, the manifest says \d+"),
    (lambda p: p.write_bytes(os.urandom(p.stat().st_size)),
     r"embeddings.npy: damaged array file: not a numeric .npy array \(no .npy header"),
])
def test_a_damaged_embeddings_file_names_the_file(tmp_path, damage, message):
    index = make_index(tmp_path / "idx")
    damage(index / "embeddings.npy")
    with pytest.raises(IndexFormatError, match=message + r".*rebuild the index"):
        load_index(index)


@pytest.mark.parametrize("array, message", [
    (np.zeros((6, 8), dtype=np.float64), "expected float32 of shape"),
    (np.zeros(48, dtype=np.float32), "expected float32 of shape"),
    (np.zeros((5, 8), dtype=np.float32), r"expected float32 of shape \(6, dim\) for the 6 lines"),
])
def test_wrong_dtype_or_shape_is_an_index_error(tmp_path, array, message):
    index = make_index(tmp_path / "idx")
    np.save(index / "embeddings.npy", array)
    write_manifest(index)  # even when the manifest agrees with the file
    with pytest.raises(IndexFormatError, match=message):
        load_index(index)


def test_damaged_lines_and_changed_documents(tmp_path, capsys):
    index = make_index(tmp_path / "idx")
    data = (index / "entries.jsonl").read_bytes()
    (index / "entries.jsonl").write_bytes(b"{oops" + data[5:])
    with pytest.raises(IndexFormatError, match=r"entries.jsonl:1: damaged line"):
        load_pool(index)  # without the manifest: the line itself
    with pytest.raises(IndexFormatError, match=r"entries.jsonl: content does not match"):
        load_index(index)
    index = make_index(tmp_path / "idx2")
    loaded = load_index(index)
    _swap_lines(index / "documents.jsonl", 0, 1)
    with pytest.raises(IndexFormatError, match=r"documents.jsonl: content does not match the manifest"):
        loaded.documents()
    assert main(["verify", str(index)]) == 1
    assert "documents.jsonl: content does not match the manifest's sha256" in capsys.readouterr().err


def test_verify_checks_entries_against_documents(tmp_path, capsys):
    index = make_index(tmp_path / "idx")
    assert main(["verify", str(index)]) == 0
    assert "ok (5 files" in capsys.readouterr().out
    write_jsonl(index / "documents.jsonl", [{"id": "other", "title": "", "text": "x"}])
    write_manifest(index, embedder={"spec": "st:test", "dim": 8})  # consistent hashes, inconsistent records
    assert main(["verify", str(index)]) == 1
    assert "names passage 'd0-0', which is not in documents.jsonl" in capsys.readouterr().err


def test_an_old_format_index_says_rebuild(tmp_path):
    index = make_index(tmp_path / "idx")
    manifest = json.loads((index / "manifest.json").read_text())
    manifest["format_version"] = 1
    del manifest["files"], manifest["format"]
    (index / "manifest.json").write_text(json.dumps(manifest))
    for name in ("entry_ids.npy", "entry_lines.npy"):  # written since; a format 1 index never held them
        (index / name).unlink()
    with pytest.raises(IndexFormatError, match=r"format_version 1 is not supported.*older sirerag.*rebuild"):
        load_index(index)
    with staged_index(index) as stage:  # and a rebuild may replace it
        make_index(stage, seed=3)
    assert load_index(index).pool.entries[0].passages == ("d3-0",)


# --- caches ----------------------------------------------------------------------------

def test_damaged_sqlite_caches_are_reported(tmp_path, capsys):
    from sirerag.embedding.cache import CACHE_FILE, EmbeddingCache

    cache = EmbeddingCache(tmp_path / "cache" / "embeddings")
    cache.put("st:test", "doc", [f"k{i}" for i in range(2000)], np.ones((2000, 64), dtype=np.float32))
    cache.close()
    assert main(["cache", "verify", str(tmp_path / "cache")]) == 0
    db = tmp_path / "cache" / "embeddings" / CACHE_FILE
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = bytearray(db.read_bytes())
    raw[4096 * 3: 4096 * 6] = os.urandom(4096 * 3)  # damaged pages
    db.write_bytes(bytes(raw))
    assert main(["cache", "verify", str(tmp_path)]) == 1
    err = capsys.readouterr()
    assert "DAMAGED" in err.out and "damaged cache" in err.err
    db.write_bytes(b"not a database" * 100)
    with pytest.raises(CacheError, match=r"embeddings.sqlite: damaged cache \(file is not a database\).*cache verify"):
        EmbeddingCache(db.parent).get("st:test", "doc", ["k1"])


# --- files.py: no umask; BuildReport ------------------------------------------------------

def test_atomic_writes_never_touch_the_umask(tmp_path, monkeypatch):
    def forbidden(*args):
        raise AssertionError("library code must not call os.umask")

    mask = os.umask(0o022)
    os.umask(mask)
    monkeypatch.setattr(os, "umask", forbidden)
    with atomic_path(tmp_path / "f.txt") as tmp:
        tmp.write_text("x")
    assert stat.S_IMODE((tmp_path / "f.txt").stat().st_mode) == 0o666 & ~mask
    with staged_index(tmp_path / "idx") as stage:
        make_index(stage)
    assert stat.S_IMODE((tmp_path / "idx").stat().st_mode) == 0o777 & ~mask


def test_build_report_is_frozen_and_serialises():
    import dataclasses

    from sirerag.pipeline.build import BuildReport

    report = BuildReport(out=Path("x"), counts={"documents": 1}, timings={"load": 0.1})
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'out'"):
        report.out = Path("y")  # type: ignore[misc]
    assert json.loads(json.dumps(report.to_dict())) == {"out": "x", "counts": {"documents": 1},
                                                         "timings": {"load": 0.1}, "components": {}}

"""The file system (issue 25, item 6): a full disk is "disk full while writing FILE", ``cache verify``
reads a cache on a read-only file system without calling it damaged, and damage is still damage.

The full disk is a real one: a 256 KiB tmpfs mounted in a private user and mount namespace
(``unshare -rm``), and so is the read-only file system (a read-only bind mount). Those tests are
skipped where the kernel does not allow unprivileged namespaces. The SQLite cache is also filled
in-process with ``PRAGMA max_page_count`` (SQLite's own "database or disk is full").
"""
from __future__ import annotations

import functools
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sirerag.cli.main import main
from sirerag.core.errors import CacheError, DiskFullError
from sirerag.core.io.sqlite import cache_errors, integrity_problems
from sirerag.llm.cache import CallCache

ROOT = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=None)
def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
                            "mount -t tmpfs -o size=64k tmpfs /tmp"], capture_output=True, timeout=30)
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif("not _namespaces()", reason="unprivileged user/mount namespaces "
                                      "(unshare -rm) are not available")


def _in_namespace(script: str, setup: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent(script)
    return subprocess.run(["unshare", "-rm", "sh", "-c", f"{setup} && exec {sys.executable} -c \"$0\"", code],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": "/tmp"})


@needs_namespaces
def test_a_full_disk_names_the_file_being_written(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    result = _in_namespace(f"""
        import numpy as np
        from sirerag.core.errors import DiskFullError
        from sirerag.core.io import save_npy, write_jsonl
        for name, write in (("embeddings.npy", lambda p: save_npy(p, np.ones((400, 384), dtype=np.float32))),
                            ("entries.jsonl", lambda p: write_jsonl(p, ({{"text": "x" * 1000}} for _ in range(400))))):
            try:
                write("{disk}/idx/" + name)
            except DiskFullError as exc:
                print(exc)
    """, f"mount -t tmpfs -o size=256k tmpfs {disk}")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"disk full while writing {disk}/idx/embeddings.npy",
                                                      f"disk full while writing {disk}/idx/entries.jsonl"]


@needs_namespaces
def test_cache_verify_on_a_read_only_file_system_reads_a_healthy_cache_as_ok(tmp_path):
    cache = CallCache(tmp_path / "idx" / "cache" / "llm")
    cache.stats()
    cache.close()
    result = _in_namespace(f"""
        import sys
        from sirerag.cli.main import main
        sys.exit(main(["cache", "verify", "{tmp_path / 'idx'}"]))
    """, f"mount --bind -o ro {tmp_path} {tmp_path}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{tmp_path / 'idx' / 'cache' / 'llm' / 'calls.sqlite'}: ok"
    assert "DAMAGED" not in result.stdout + result.stderr


def test_cache_verify_still_finds_a_damaged_cache(tmp_path, capsys):
    bad = tmp_path / "cache" / "llm" / "calls.sqlite"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a database at all" * 100)
    assert main(["cache", "verify", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert "DAMAGED" in out.out and "1 of 1 cache files damaged" in out.err
    assert integrity_problems(bad)


def test_a_full_cache_database_is_disk_full_not_damaged(tmp_path):
    db = tmp_path / "full.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (v TEXT)")
    conn.execute("PRAGMA max_page_count = 3")
    with pytest.raises(DiskFullError, match=rf"^disk full while writing {db}"):
        with cache_errors(db):
            for _ in range(100):
                conn.execute("INSERT INTO t VALUES (?)", ("x" * 2000,))
    conn.close()


def test_a_cache_that_cannot_be_opened_is_not_called_damaged(tmp_path):
    with pytest.raises(CacheError, match="cannot use the cache") as info:
        with cache_errors(tmp_path / "x.sqlite"):
            sqlite3.connect(f"file:{tmp_path}/missing/x.sqlite?mode=ro", uri=True)
    assert "damaged" not in str(info.value)


@needs_namespaces
def test_a_cache_on_a_nearly_full_disk_is_disk_full_at_every_size(tmp_path):
    """With 8-20 KB free SQLite cannot grow its 32 KiB WAL index and says "disk I/O error"
    (SQLITE_IOERR_SHMSIZE), not "database or disk is full": still a full disk, named as one."""
    disk = tmp_path / "disk"
    disk.mkdir()
    result = _in_namespace(f"""
        import os, shutil
        import numpy as np
        from sirerag.core.errors import CacheError, DiskFullError
        from sirerag.embedding.cache import EmbeddingCache
        for free in (4, 8, 12, 14, 16, 20, 64):
            shutil.rmtree("{disk}/cache", ignore_errors=True)
            with open("{disk}/filler", "wb") as fh:
                fh.truncate(0)
                fh.write(b"x" * max(0, shutil.disk_usage("{disk}").free - free * 1024))
            try:
                cache = EmbeddingCache("{disk}/cache/embeddings")
                cache.put("m", "doc", [str(i) for i in range(200)], np.ones((200, 384), dtype=np.float32))
                print(free, "written")
            except (DiskFullError, CacheError) as exc:
                print(free, type(exc).__name__, exc)
    """, f"mount -t tmpfs -o size=256k tmpfs {disk}")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 7, lines
    for line in lines:
        free, kind, message = line.split(" ", 2)
        assert (kind, message.split(" (")[0]) == (
            "DiskFullError", f"disk full while writing {disk}/cache/embeddings/embeddings.sqlite"), line

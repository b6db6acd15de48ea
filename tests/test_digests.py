"""The sha256 memo of large files (sirerag.core.io.digests): used while the file's stat is unchanged, never after."""
import hashlib
import json
import os

import pytest

from sirerag.core.io import digests


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    digests._digest.cache_clear()
    yield tmp_path / "xdg" / "sirerag" / digests.MEMO_DIR
    digests._digest.cache_clear()


def test_the_digest_is_remembered_with_the_files_stat(tmp_path, cache):
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"weights" * 1000)
    real = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert digests.file_sha256(weights) == real
    (memo,) = cache.iterdir()
    record = json.loads(memo.read_text())
    stat = weights.stat()
    assert record == {"path": str(weights.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                      "inode": stat.st_ino, "ctime_ns": stat.st_ctime_ns, "sha256": real}
    # a new process reads the memo instead of hashing: a planted digest with the same stat is what it returns
    memo.write_text(json.dumps({**record, "sha256": "f" * 64}))
    digests._digest.cache_clear()
    assert digests.file_sha256(weights) == "f" * 64


def test_a_changed_file_is_hashed_again(tmp_path, cache):
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"weights" * 1000)
    digests.file_sha256(weights)
    (memo,) = cache.iterdir()
    record = json.loads(memo.read_text())
    memo.write_text(json.dumps({**record, "sha256": "f" * 64}))
    # same size, mtime set back: the status-change time still tells the write
    stat = weights.stat()
    weights.write_bytes(b"WEIGHTS" * 1000)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    digests._digest.cache_clear()
    assert digests.file_sha256(weights) == hashlib.sha256(b"WEIGHTS" * 1000).hexdigest()
    assert json.loads(memo.read_text())["sha256"] == hashlib.sha256(b"WEIGHTS" * 1000).hexdigest()


def test_an_unusable_memo_only_costs_the_hash(tmp_path, cache):
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"x")
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the memo folder should be")  # nothing can be written under it
    assert digests.file_sha256(weights) == hashlib.sha256(b"x").hexdigest()
    digests._digest.cache_clear()
    assert digests.file_sha256(weights) == hashlib.sha256(b"x").hexdigest()

"""The index's file layer: atomic writes and folders, JSONL errors naming file and line, .npy without
pickle, the manifest's format version."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sirerag.core.errors import IndexFormatError, InputError
from sirerag.core.io import (
    FORMAT_VERSION,
    atomic_path,
    load_npy,
    read_jsonl,
    read_manifest,
    save_npy,
    write_json,
    write_jsonl,
    write_manifest,
)


def test_atomic_write_keeps_old_file_when_writer_fails(tmp_path):
    target = tmp_path / "records.jsonl"
    write_jsonl(target, [{"a": 1}])

    def failing():
        yield {"a": 2}
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="killed mid-write"):
        write_jsonl(target, failing())
    assert list(read_jsonl(target)) == [{"a": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["records.jsonl"]  # no temp file left behind


def test_read_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(InputError, match=r"x\.jsonl:3: invalid JSON"):
        list(read_jsonl(path))
    path.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(InputError, match=r"x\.jsonl:2: not valid UTF-8"):
        list(read_jsonl(path))
    path.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"x\.jsonl:2: expected a JSON object, got list"):
        list(read_jsonl(path))


def test_npy_round_trip_and_no_pickle(tmp_path):
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    save_npy(tmp_path / "a.npy", arr)
    np.testing.assert_array_equal(load_npy(tmp_path / "a.npy"), arr)
    with pytest.raises(TypeError, match="pickle"):
        save_npy(tmp_path / "b.npy", np.array([{"x": 1}], dtype=object))


def test_manifest_version_is_checked(tmp_path):
    write_manifest(tmp_path, parameters={"k": 1})
    manifest = read_manifest(tmp_path)
    assert manifest.format_version == FORMAT_VERSION and manifest.extra["parameters"] == {"k": 1}
    write_json(tmp_path / "manifest.json", {**manifest.to_dict(), "format_version": FORMAT_VERSION + 1})
    with pytest.raises(IndexFormatError, match="format_version .* is not supported"):
        read_manifest(tmp_path)
    with pytest.raises(IndexFormatError, match="manifest.json is missing"):
        read_manifest(tmp_path / "nowhere")


def test_atomic_path_creates_parent(tmp_path):
    with atomic_path(tmp_path / "deep" / "f.json") as tmp:
        tmp.write_text(json.dumps([1]))
    assert json.loads((tmp_path / "deep" / "f.json").read_text()) == [1]


def test_atomic_dir_replaces_on_success_and_keeps_the_old_folder_on_failure(tmp_path):
    from sirerag.core.io import atomic_dir

    target = tmp_path / "out"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("first")
    assert (target / "a.txt").read_text() == "first"
    with pytest.raises(RuntimeError, match="stop"):
        with atomic_dir(target) as tmp:
            (tmp / "a.txt").write_text("second")
            raise RuntimeError("stop")
    assert (target / "a.txt").read_text() == "first"
    with atomic_dir(target) as tmp:
        (tmp / "b.txt").write_text("third")
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary or old folder left


def test_an_index_json_file_is_read_with_orjson_and_a_bad_one_is_named(tmp_path):
    from sirerag.core.errors import IndexFormatError
    from sirerag.core.io.files import read_index_json

    good = tmp_path / "surface.json"
    good.write_text('[["paris", 3], ["nan", NaN]]', encoding="utf-8")  # NaN: orjson refuses, json reads
    value = read_index_json(good)
    assert value[0] == ["paris", 3] and value[1][1] != value[1][1]
    bad = tmp_path / "tagger.json"
    bad.write_text('{"counts": ', encoding="utf-8")
    with pytest.raises(IndexFormatError, match=r"tagger\.json: unreadable index file .*; rebuild the index"):
        read_index_json(bad)
    with pytest.raises(IndexFormatError, match=r"absent\.json: unreadable index file"):
        read_index_json(tmp_path / "absent.json")

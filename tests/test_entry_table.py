"""The pool's entry table: a load reads ids, kinds and line offsets from it instead of scanning entries.jsonl, and
checks the file by its sample; a table that disagrees with the file, or is damaged, is reported naming the file;
an index written before the table loads as before."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import write_manifest
from sirerag.pool.entry_table import IDS, LINES
from sirerag.pool.loaded import load_index
from tests.test_index_safety import make_index


def _no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(data: bytes) -> None:
        raise AssertionError("entries.jsonl was scanned")

    monkeypatch.setattr("sirerag.pool.entries.line_offsets", refuse)


def test_a_load_reads_the_table_not_the_file(tmp_path, monkeypatch):
    index = make_index(tmp_path / "idx", n=7)
    scanned = load_index(index).pool  # the table and the scan agree
    _no_scan(monkeypatch)
    pool = load_index(index).pool
    assert pool.ids == scanned.ids and pool.entries.kinds == ["leaf"] * 7
    assert [e.text for e in pool.entries] == [f"passage {i} of corpus 0" for i in range(7)]


def test_an_index_without_the_table_is_scanned(tmp_path, monkeypatch):
    index = make_index(tmp_path / "idx")
    ids = load_index(index).pool.ids
    for name in (IDS, LINES):
        (index / name).unlink()
    write_manifest(index, embedder={"spec": "st:test", "dim": 8}, components={"pool": {"type": "pool"}})
    assert load_index(index).pool.ids == ids
    _no_scan(monkeypatch)
    with pytest.raises(AssertionError, match="scanned"):
        load_index(index)


def test_a_table_that_disagrees_with_the_file_is_reported_at_the_line(tmp_path):
    index = make_index(tmp_path / "idx")
    table = np.load(index / IDS)
    table[2, 1] = ord("0") if table[2, 1] != ord("0") else ord("1")  # row 2 names an id no line has
    np.save(index / IDS, table)
    write_manifest(index, embedder={"spec": "st:test", "dim": 8}, components={"pool": {"type": "pool"}})
    pool = load_index(index).pool
    assert pool.entries[0].passages == ("d0-0",)
    with pytest.raises(IndexFormatError, match=r"entries\.jsonl:3: entry id .* read as"):
        pool.entries[2]


@pytest.mark.parametrize("damage", ["offsets", "kind", "shape"])
def test_a_damaged_table_is_reported_naming_it(tmp_path, damage):
    index = make_index(tmp_path / "idx")
    lines = np.load(index / LINES)
    if damage == "offsets":
        lines[1, 0] += 1
    elif damage == "kind":
        lines[0, 2] = 99
    else:
        lines = lines[:, :2].copy()
    np.save(index / LINES, lines)
    write_manifest(index, embedder={"spec": "st:test", "dim": 8}, components={"pool": {"type": "pool"}})
    with pytest.raises(IndexFormatError, match=r"entry_lines\.npy: .*(line offsets|unknown entry kind|expected int64)"):
        load_index(index)


def test_a_same_size_change_of_the_entries_is_caught_by_the_sample(tmp_path):
    index = make_index(tmp_path / "idx")
    raw = (index / "entries.jsonl").read_bytes()
    (index / "entries.jsonl").write_bytes(raw.replace(b"passage 1 of", b"passage 9 of"))
    with pytest.raises(IndexFormatError, match="entries.jsonl: content does not match the manifest's sample"):
        load_index(index)
    record = json.loads((index / "manifest.json").read_text())["files"]["entries.jsonl"]
    assert record["sha256"] and record["sample_sha256"]  # verify still checks the whole file

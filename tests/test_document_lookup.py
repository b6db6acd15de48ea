"""A search titles its results from the documents it shows, read a line at a time: the same documents as the whole
file parsed, found by id at a line start only, another layout read whole once, a damaged line named."""
from __future__ import annotations

import json

import pytest

from sirerag.core.errors import IndexFormatError
from sirerag.pool.documents import DocumentLookup
from sirerag.pool.loaded import load_index
from tests.test_index_safety import make_index


def _no_full_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self, name, cls):  # noqa: ANN001, ANN202
        raise AssertionError(f"{name} was read whole")

    monkeypatch.setattr("sirerag.pool.loaded.LoadedIndex._read", refuse)


def test_documents_are_read_by_id_without_the_whole_file(tmp_path, monkeypatch):
    index = load_index(make_index(tmp_path / "idx", n=5))
    every = {d.id: d for d in index.documents()}
    _no_full_read(monkeypatch)
    lookup = index.document_lookup()
    for key in ("d0-3", "d0-0", "d0-4"):
        assert lookup[key] == every[key]
    assert "d0-2" in lookup
    monkeypatch.undo()  # an id on no line start: the whole file, once
    assert lookup.get("nope") is None and "d0-1" in lookup


def test_an_id_inside_a_text_is_not_a_line_start(tmp_path):
    path = tmp_path / "documents.jsonl"
    rows = [{"id": "a", "title": "A", "text": 'quotes {"id": "b", "title": "fake"}'}, {"id": "b", "title": "B",
                                                                                       "text": "real"}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    lookup = DocumentLookup(path, path.read_bytes(), lambda: [], tmp_path)
    assert lookup["b"].title == "B"


def test_another_layout_is_read_whole_once(tmp_path):
    from sirerag.core.types import Document

    path = tmp_path / "documents.jsonl"
    path.write_text(json.dumps({"title": "A", "id": "a", "text": "x"}) + "\n", encoding="utf-8")
    calls = []

    def read_all() -> list[Document]:
        calls.append(1)
        return [Document(id="a", title="A", text="x")]

    lookup = DocumentLookup(path, path.read_bytes(), read_all, tmp_path)
    assert lookup["a"].title == "A" and "z" not in lookup
    assert calls == [1]


def test_a_damaged_line_is_named(tmp_path):
    path = tmp_path / "documents.jsonl"
    path.write_bytes(b'{"id": "a", "title": "A", "text": "x"}\n{"id": "b", "title": 3\n')
    lookup = DocumentLookup(path, path.read_bytes(), lambda: [], tmp_path)
    assert lookup["a"].title == "A"
    with pytest.raises(IndexFormatError, match=r"documents\.jsonl:2: not a document"):
        lookup["b"]


def test_a_search_titles_its_results_without_reading_every_document(tmp_path, monkeypatch):
    import numpy as np

    import sirerag
    from sirerag.retrievers.base import Hit

    index = sirerag.Index.load(make_index(tmp_path / "idx", n=4))
    _no_full_read(monkeypatch)
    monkeypatch.setattr(type(index), "retriever", lambda self, name=None, **o: _Fixed(index))
    results = index.search_many(["anything"], k=2)[0]
    assert [r.title for r in results] == ["T2", "T0"]
    assert np.isfinite([r.score for r in results]).all() and Hit  # the hits as the retriever gave them


class _Fixed:
    def __init__(self, index) -> None:  # noqa: ANN001
        self.ids = index._loaded.pool.ids

    def search_many(self, queries, k=10):  # noqa: ANN001, ANN201
        from sirerag.retrievers.base import Hit

        return [[Hit(self.ids[2], 0.9), Hit(self.ids[0], 0.5)] for _ in queries]

"""The surface forms stored as mapped arrays (sirerag.graph.surface_table): the same nodes and matches as the dict
they replace, two forms with one hash told apart by their bytes, a damaged table named, and a built index's search
reading the table, not surface.json."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import sirerag.graph.surface_table as surface_table
from sirerag.core.errors import IndexFormatError
from sirerag.core.io import save_npy
from sirerag.graph.surface import SurfaceIndex, surface_forms
from sirerag.graph.surface_table import FormTable, save_form_table

NAMES = ["Clara Peeters", "Antwerp", "Zoë Kravitz", "Palme d'Or", "Pulp Fiction", "Quentin Tarantino", "Cannes",
         "Film", "1994 Cannes Film Festival", "Ōsaka", "The Who", "北京"]
QUERIES = ["Who directed the film that won the Palme d'Or at the 1994 Cannes Film Festival?",
           "Where was clara peeters born, and was Zoe Kravitz in Pulp Fiction?", "film music of The Who",
           "Which city is Osaka near, and is 北京 far from Antwerp?", "", "What is the Film about?"]


def _table(tmp_path: Path, pairs: list[tuple[str, int]]) -> FormTable:
    info = save_form_table(tmp_path / "surface", pairs)
    return FormTable.open(tmp_path / "surface", forms=info["forms"], longest=info["longest"], n_nodes=len(NAMES))


def test_the_table_finds_each_form_s_node_as_the_dict_does(tmp_path: Path) -> None:
    pairs = surface_forms(NAMES)
    table = _table(tmp_path, pairs)
    forms = [form for form, _ in pairs] + ["not a form", "clara", "", "zoe kravitz "]
    assert table.get_many(forms) == [dict(pairs).get(form) for form in forms] and len(table) == len(pairs)
    assert table.longest == max(len(form) for form, _ in pairs) and table.get("antwerp") == 1
    assert table.get("nowhere", -1) == -1 and table.get_many([]) == []
    with_dict, with_table = SurfaceIndex(NAMES, forms=pairs), SurfaceIndex(NAMES, forms=table)
    assert with_table.size == with_dict.size and with_table.longest == with_dict.longest
    for query in QUERIES:
        assert with_table.match(query) == with_dict.match(query)
    assert [m.node for m in with_table.match(QUERIES[0])] == [3, 8]


def test_forms_sharing_a_hash_are_told_apart_by_their_bytes(tmp_path: Path, monkeypatch) -> None:
    real = surface_table.form_hashes
    monkeypatch.setattr(surface_table, "form_hashes",  # three buckets: every hash is shared by several forms
                        lambda forms: real(forms) % np.uint64(3))
    pairs = surface_forms(NAMES)
    table = _table(tmp_path, pairs)
    assert len(set(table.hashes.tolist())) <= 3
    assert table.get_many([form for form, _ in pairs] + ["unknown"]) == [node for _, node in pairs] + [None]


def test_a_damaged_table_is_named(tmp_path: Path) -> None:
    pairs = surface_forms(NAMES)
    info = save_form_table(tmp_path / "surface", pairs)
    folder = tmp_path / "surface"
    with pytest.raises(IndexFormatError, match=r"surface: the surface form arrays .* do not describe \d+ forms of a "
                                               r"3-node graph"):
        FormTable.open(folder, forms=info["forms"], longest=info["longest"], n_nodes=3)  # a node past the graph
    with pytest.raises(IndexFormatError, match="do not describe 99 forms"):
        FormTable.open(folder, forms=99, longest=info["longest"], n_nodes=len(NAMES))
    hashes = np.load(folder / "hashes.npy")
    save_npy(folder / "hashes.npy", hashes[::-1].copy())  # out of order: a binary search would miss forms
    with pytest.raises(IndexFormatError, match="surface form arrays"):
        FormTable.open(folder, forms=info["forms"], longest=info["longest"], n_nodes=len(NAMES))
    (folder / "text.npy").unlink()
    with pytest.raises(IndexFormatError, match=r"surface/text\.npy: array file is missing"):
        FormTable.open(folder, forms=info["forms"], longest=info["longest"], n_nodes=len(NAMES))


def test_a_built_index_s_search_reads_the_table_not_the_json(tmp_path: Path, monkeypatch) -> None:
    from sirerag.cli.main import main
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import load_retriever

    data = Path(__file__).resolve().parents[1] / "data"
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join((data / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:40]) + "\n",
                      encoding="utf-8")
    out = tmp_path / "index"
    assert main(["build", str(corpus), "--out", str(out), "--chunking", "passage", "--graph", "--quiet"]) == 0
    record = json.loads((out / "graph" / "graph.json").read_text())["query_aids"]["surface"]
    stored = json.loads((out / "graph" / record["path"]).read_text())
    assert record["table"] == "surface" and record["forms"] == len(stored) > 0
    question = json.loads((data / "questions.jsonl").read_text().splitlines()[0])["question"]
    import sirerag.graph.query_aids as aids

    read = aids.read_index_json

    def refuse_json(path: Path):
        assert Path(path).name != "surface.json", "the search parsed surface.json"
        return read(path)

    monkeypatch.setattr(aids, "read_index_json", refuse_json)
    with load_retriever("ppr", load_index(out)) as retriever:
        surface = retriever.base.surface
        assert isinstance(surface.table, FormTable)
        assert surface.table.get_many([form for form, _ in stored]) == [node for _, node in stored]
        assert retriever.search(question, k=3)

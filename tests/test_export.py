"""Pool export round trips: every format read back and compared with the pool it came from."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from sirerag.cli.main import main
from sirerag.core.errors import ConfigError, MissingExtraError
from sirerag.pool.export import FORMATS, export_pool
from sirerag.core.io import collection_text
from sirerag.core.io import read_jsonl, write_jsonl, write_manifest
from sirerag.pool.store import DOCUMENTS, save_pool
from sirerag.pool.loaded import load_index
from sirerag.core.types import Node, Pool

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    """An index whose pool mixes leaves (real passages), summaries over them and entity
    aggregates, with one text holding tabs and line breaks."""
    with open(DATA / "corpus.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for _, line in zip(range(40), fh)]
    leaves = []
    for row in rows:
        text = f"{row['title']}\n{row['text']}"
        leaves.append(Node(id=Node.make_id("leaf", "similarity", 0, text), text=text, kind="leaf",
                           tree="similarity", level=0, passages=(row["id"],)))
    summaries = []
    for i in range(0, 40, 8):
        group = leaves[i : i + 8]
        text = " ".join(leaf.text.split(". ")[0] for leaf in group)
        children = tuple(leaf.id for leaf in group)
        summaries.append(Node(id=Node.make_id("summary", "similarity", 1, text, children), text=text,
                              kind="summary", tree="similarity", level=1, children=children,
                              passages=tuple(p for leaf in group for p in leaf.passages)))
    aggregates = []
    for i, row in enumerate(rows[:6]):
        text = f"{row['title']} is described.\t{row['title']} appears in passage {i}.\r\nSecond line."
        aggregates.append(Node(id=Node.make_id("aggregate", "relatedness", 0, text), text=text, kind="aggregate",
                               tree="relatedness", level=0, passages=(row["id"],), entity=row["title"].lower(),
                               propositions=(f"f{i}a", f"f{i}b")))
    entries = tuple(leaves + summaries + aggregates)
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(len(entries), 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    directory = tmp_path_factory.mktemp("export") / "index"
    directory.mkdir()
    save_pool(directory, Pool(entries=entries, embeddings=vectors))
    write_jsonl(directory / DOCUMENTS, rows)
    write_manifest(directory, embedder={"spec": "st:test", "dim": 16}, components={"pool": {"type": "pool"}})
    return directory


def test_beir_corpus_round_trip(index_dir, tmp_path):
    pool = load_index(index_dir).pool
    report = export_pool(index_dir, tmp_path / "beir", "beir")
    assert report.rows == len(pool) and set(report.files) == {"corpus.jsonl", DOCUMENTS, "export.json"}
    rows = list(read_jsonl(tmp_path / "beir" / "corpus.jsonl"))
    assert [r["_id"] for r in rows] == [e.id for e in pool.entries]
    for row, entry in zip(rows, pool.entries):
        assert row["text"] == entry.text and row["title"] == ""
        meta = row["metadata"]
        assert (meta["tree"], meta["kind"], meta["level"], meta["entity"]) == \
            (entry.tree, entry.kind, entry.level, entry.entity)
        assert meta["children"] == list(entry.children) and meta["passages"] == list(entry.passages)
    assert {r["metadata"]["kind"] for r in rows} == {"leaf", "summary", "aggregate"}
    documents = {d["id"] for d in read_jsonl(tmp_path / "beir" / DOCUMENTS)}
    assert all(p in documents for e in pool.entries for p in e.passages)  # every entry maps to passages
    info = json.loads((tmp_path / "beir" / "export.json").read_text())
    assert info["format"] == "beir" and info["entries"] == len(pool) and info["embedder"]["spec"] == "st:test"


def test_colbert_collection_has_one_line_per_entry_and_a_pid_map(index_dir, tmp_path):
    pool = load_index(index_dir).pool
    export_pool(index_dir, tmp_path / "colbert", "colbert")
    raw = (tmp_path / "colbert" / "collection.tsv").read_bytes().decode("utf-8")
    lines = raw.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(pool)
    pid_to_entry = json.loads((tmp_path / "colbert" / "pid_to_entry.json").read_text())
    assert pid_to_entry == [e.id for e in pool.entries]
    for pid, line in enumerate(lines[:-1]):
        number, text = line.split("\t")  # exactly one tab: the ones in texts became spaces
        assert int(number) == pid
        assert text == collection_text(pool.get(pid_to_entry[pid]).text)
        assert "\r" not in text
    assert lines[-2].endswith("appears in passage 5. Second line.")


def test_jsonl_entries_and_embeddings_round_trip(index_dir, tmp_path):
    pool = load_index(index_dir).pool
    export_pool(index_dir, tmp_path / "jsonl", "jsonl")
    entries = [Node.from_dict(r) for r in read_jsonl(tmp_path / "jsonl" / "entries.jsonl")]
    assert entries == list(pool.entries)  # provenance (children, passages, entity, propositions) included
    vectors = np.load(tmp_path / "jsonl" / "embeddings.npy", allow_pickle=False)
    assert vectors.dtype == np.float32 and vectors.shape == pool.embeddings.shape
    np.testing.assert_array_equal(vectors, pool.embeddings)


def test_parquet_round_trip(index_dir, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    pool = load_index(index_dir).pool
    export_pool(index_dir, tmp_path / "parquet", "parquet")
    table = pq.read_table(tmp_path / "parquet" / "entries.parquet")
    assert table.num_rows == len(pool)
    columns = table.to_pydict()
    assert columns["id"] == [e.id for e in pool.entries]
    assert columns["passages"] == [list(e.passages) for e in pool.entries]
    assert columns["children"] == [list(e.children) for e in pool.entries]
    assert columns["entity"] == [e.entity for e in pool.entries]
    assert columns["level"] == [e.level for e in pool.entries]
    vectors = np.asarray(columns["embedding"], dtype=np.float32)
    assert vectors.shape == pool.embeddings.shape
    np.testing.assert_array_equal(vectors, pool.embeddings)
    assert str(table.schema.field("embedding").type) == "fixed_size_list<element: float>[16]"


def test_parquet_without_pyarrow_names_the_extra(index_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    with pytest.raises(MissingExtraError, match=r"sirerag\[export\]"):
        export_pool(index_dir, tmp_path / "parquet", "parquet")
    assert not (tmp_path / "parquet").exists()


def test_existing_folders_are_protected_and_exports_replaced_only_on_request(index_dir, tmp_path):
    export_pool(index_dir, tmp_path / "out", "beir")
    with pytest.raises(ConfigError, match="--overwrite"):
        export_pool(index_dir, tmp_path / "out", "jsonl")
    report = export_pool(index_dir, tmp_path / "out", "jsonl", overwrite=True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(report.files)  # nothing left over
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not a sirerag export"):
        export_pool(index_dir, other, "beir", overwrite=True)
    assert (other / "notes.txt").read_text() == "keep me"
    with pytest.raises(ConfigError, match="format must be one of"):
        export_pool(index_dir, tmp_path / "x", "csv")


def test_a_failed_export_leaves_nothing_behind(index_dir, tmp_path, monkeypatch):
    import sirerag.pool.export

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(sirerag.pool.export, "save_npy", disk_full)
    with pytest.raises(OSError, match="No space"):
        export_pool(index_dir, tmp_path / "out", "jsonl")
    assert [p.name for p in tmp_path.iterdir()] == [".out.lock"]  # only the lock file, kept beside the folder


def test_cli_export_writes_each_format(index_dir, tmp_path, capsys):
    formats = [f for f in FORMATS if f != "parquet" or _has_pyarrow()]
    for fmt in formats:
        assert main(["export", str(index_dir), "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
        assert (tmp_path / fmt / "export.json").is_file()
    assert f"exported {len(load_index(index_dir).pool)} entries as beir" in capsys.readouterr().out
    assert main(["export", str(index_dir), "--format", "beir", "--out", str(tmp_path / "beir")]) == 1
    assert "--overwrite" in capsys.readouterr().err


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True

"""Paths read from an index stay inside it (issue 43, security 3), and a manifest of another format is refused.

A manifest listing ``"/etc/hostname"`` or ``"../victim.txt"`` under ``files``, a component whose ``path`` is
``"../../../etc"``, a file of the index that is a symlink to a file outside it, a ``graph.json`` query aid
naming a file outside the graph folder, an export's ``export.json`` or a dataset marker listing a file outside
its folder: each stops the load (or the overwrite) with one line naming the file and the field, before the
outside file is opened.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_index_safety import make_index

from sirerag.cli.main import main
from sirerag.core.errors import ConfigError, IndexFormatError
from sirerag.core.io.contained import leaves
from sirerag.core.io.guard import DATASET_MARKER, check_dataset_out, check_export_out
from sirerag.core.io.manifest import read_manifest
from sirerag.graph.store import load_graph
from sirerag.pool.loaded import load_index


def _edit(index: Path, change) -> None:
    path = index / "manifest.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _victim(tmp_path: Path) -> tuple[Path, dict]:
    victim = tmp_path / "victim.txt"
    victim.write_text("a secret of someone else\n")
    data = victim.read_bytes()
    return victim, {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _one_error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sirerag {command}: error: "), err
    return err[0]


@pytest.mark.parametrize("listed", ["../victim.txt", "ABSOLUTE"])
def test_a_listed_file_outside_the_index_stops_the_load_search_and_verify(tmp_path, capsys, listed):
    index = make_index(tmp_path / "idx")
    victim, record = _victim(tmp_path)
    rel = str(victim) if listed == "ABSOLUTE" else listed
    _edit(index, lambda m: m["files"].update({rel: record}))  # the right size and sha256: nothing else would stop it
    field = f'files["{rel}"]: path leaves the index folder'
    with pytest.raises(IndexFormatError, match=r"path leaves the index folder$") as info:
        load_index(index, verify=True)
    assert str(info.value) == f"{index / 'manifest.json'}: {field}"
    assert main(["verify", str(index)]) == 1
    assert _one_error(capsys, "verify").endswith(field)
    assert main(["search", str(index), "passage 1"]) == 1
    assert _one_error(capsys, "search").endswith(field)


def test_a_component_path_outside_the_index_stops_inspect(tmp_path, capsys):
    index = make_index(tmp_path / "idx")
    _edit(index, lambda m: m["components"].update({"graph": {"type": "entity_graph", "path": "../../../etc"}}))
    with pytest.raises(IndexFormatError, match=r"manifest\.json: components\.graph\.path: path leaves the index"):
        read_manifest(index)
    assert main(["inspect", str(index), "--out", str(tmp_path / "report.html")]) == 1
    assert _one_error(capsys, "inspect").endswith("components.graph.path: path leaves the index folder")
    assert not (tmp_path / "report.html").exists()


def test_a_colbert_index_path_outside_the_index_is_refused(tmp_path):
    index = make_index(tmp_path / "idx")
    _edit(index, lambda m: m["components"].update(
        {"colbert": {"type": "colbert-plaid", "path": "colbert", "indexes": {"ck": {"path": "/tmp"}}}}))
    with pytest.raises(IndexFormatError, match=r'components\.colbert\.indexes\["ck"\]\.path: path leaves the index'):
        read_manifest(index)


def test_a_symlink_inside_the_index_pointing_out_is_refused(tmp_path):
    index = make_index(tmp_path / "idx")
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes((index / "documents.jsonl").read_bytes())  # same bytes: size and sha256 match
    (index / "documents.jsonl").unlink()
    (index / "documents.jsonl").symlink_to(outside)
    with pytest.raises(IndexFormatError, match=r'files\["documents\.jsonl"\]: path leaves the index folder$'):
        load_index(index)
    other = make_index(tmp_path / "other")  # a folder of the index that is a link out of it
    (other / "graph").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    _edit(other, lambda m: m["components"].update({"graph": {"type": "entity_graph", "path": "graph"}}))
    with pytest.raises(IndexFormatError, match=r"components\.graph\.path: path leaves the index folder$"):
        read_manifest(other)


def test_a_symlinked_index_folder_and_links_inside_it_still_load(tmp_path):
    index = make_index(tmp_path / "real")
    (tmp_path / "link").symlink_to(index)
    assert len(load_index(tmp_path / "link").pool) == 6
    (index / "docs").mkdir()
    (index / "docs" / "d.jsonl").write_text("x")
    (index / "alias").symlink_to(index / "docs")
    assert not leaves(index, "alias/d.jsonl") and leaves(index, "alias/../../x") and leaves(index, "/etc")


def test_a_query_aid_outside_the_graph_folder_is_refused(tmp_path):
    graph = tmp_path / "idx" / "graph"
    graph.mkdir(parents=True)
    (tmp_path / "idx" / "surface.json").write_text("[]")
    (graph / "graph.json").write_text(json.dumps({"format": 1, "query_aids": {"surface": {"path": "../surface.json",
                                                                                         "min_chars": 3}}}))
    with pytest.raises(IndexFormatError, match=r"graph\.json: query_aids\.surface\.path: path leaves the graph folder"):
        load_graph(graph)


def test_an_export_marker_listing_a_file_outside_its_folder_is_refused(tmp_path):
    index = make_index(tmp_path / "idx")
    out = tmp_path / "export"
    out.mkdir()
    (out / "export.json").write_text(json.dumps({"format": "jsonl", "sirerag_version": "0", "files": [
        "export.json", "../victim.txt"]}))
    with pytest.raises(ConfigError, match=r'export\.json: files\["\.\./victim\.txt"\]: path leaves the folder'):
        check_export_out(out, index, overwrite=True)


def test_a_dataset_marker_listing_a_file_outside_its_folder_is_refused(tmp_path):
    out = tmp_path / "converted"
    out.mkdir()
    (out / "corpus.jsonl").write_text("")
    (out / DATASET_MARKER).write_text(json.dumps({"generator": "sirerag 0", "files": ["corpus.jsonl", "/etc/passwd"]}))
    with pytest.raises(ConfigError, match=r'sirerag-dataset\.json: files\["/etc/passwd"\]: path leaves the folder'):
        check_dataset_out(out)


def test_a_manifest_of_another_format_is_refused_at_load_and_never_updated(tmp_path, capsys):
    index = make_index(tmp_path / "idx")
    _edit(index, lambda m: m.update(format="other-tool-index"))
    before = (index / "manifest.json").read_bytes()
    with pytest.raises(IndexFormatError, match=r'manifest\.json: unknown format "other-tool-index" \(format_version'):
        load_index(index)
    corpus = tmp_path / "more.jsonl"
    corpus.write_text(json.dumps({"id": "n1", "text": "A new town."}) + "\n")
    assert main(["add", str(index), str(corpus), "--quiet"]) == 1
    assert 'unknown format "other-tool-index"' in _one_error(capsys, "add")
    assert (index / "manifest.json").read_bytes() == before


def test_the_cli_in_a_subprocess_refuses_an_outside_path_in_one_line(tmp_path):
    index = make_index(tmp_path / "idx")
    victim, record = _victim(tmp_path)
    _edit(index, lambda m: m["files"].update({"../victim.txt": record}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    for args in (["verify", str(index)], ["inspect", str(index), "--out", str(tmp_path / "r.html")]):
        done = subprocess.run([sys.executable, "-m", "sirerag.cli.main", *args, "--quiet"], capture_output=True,
                              text=True, env=env, timeout=120)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.splitlines() == [f"sirerag {args[0]}: error: {index / 'manifest.json'}: "
                                            'files["../victim.txt"]: path leaves the index folder']

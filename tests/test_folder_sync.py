"""Folders that stay in sync: a folder's documents are keyed and titled by their relative path (two README files
stay two documents), Markdown is split at its headings with the heading path as provenance, an edited file is an
update that leaves no trace of the old text (leaves, summaries, documents, BM25), a removed section goes, and
``add --sync`` also removes the documents of deleted files."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sirerag
from sirerag.cli.main import main
from sirerag.core.errors import ConfigError
from sirerag.corpus.load import load_corpus
from sirerag.corpus.folder import stale_folder_ids
from sirerag.core.types import Document
from sirerag.corpus.markdown import slugify, split_sections


def test_markdown_is_split_at_headings_with_the_heading_path():
    source = ("Intro line.\n\n# Install\nRun the installer.\n\n```sh\n# not a heading\nmake\n```\n\n"
              "## Linux\nUse apt.\n\nSetext Title\n------------\nUnder setext.\n\n# Usage\n## Linux\nRun it.\n"
              "# Install\n> # quoted heading\nAgain.\n# Empty\n")
    sections = split_sections(source)
    assert [(s.heading_path, s.slug) for s in sections] == [
        ("", ""), ("Install", "install"), ("Install > Linux", "install/linux"),
        ("Install > Setext Title", "install/setext-title"), ("Usage > Linux", "usage/linux"),
        ("Install", "install-2")]
    assert sections[0].text == "Intro line."
    assert sections[1].text == "Run the installer.\n\n```sh\n# not a heading\nmake\n```"  # code stays text
    assert sections[-1].text == "> # quoted heading\nAgain."
    assert slugify("Install on Linux!") == "install-on-linux" and slugify("???") == "section"


def test_a_folder_is_keyed_and_titled_by_relative_path(tmp_path):
    docs = tmp_path / "docs"
    (docs / "alpha").mkdir(parents=True)
    (docs / "beta").mkdir()
    (docs / "alpha" / "README.md").write_text("Alpha is a river.\n", encoding="utf-8")
    (docs / "beta" / "README.md").write_text("Beta is a mountain.\n\n## History\nClimbed in 1901.\n", encoding="utf-8")
    (docs / "beta" / "headings.md").write_text("# Only\n## Headings\n", encoding="utf-8")
    loaded = load_corpus(docs)
    assert [(d.id, d.title, d.section, d.text) for d in loaded] == [
        ("alpha/README.md", "alpha/README.md", "", "Alpha is a river."),
        ("beta/README.md", "beta/README.md", "", "Beta is a mountain."),
        ("beta/README.md#history", "beta/README.md", "History", "Climbed in 1901."),
        ("beta/headings.md", "beta/headings.md", "", "# Only\n## Headings")]  # headings only: kept whole
    assert loaded[2].content == "beta/README.md > History\nClimbed in 1901."
    assert loaded[2].to_dict() == {"id": "beta/README.md#history", "text": "Climbed in 1901.",
                                   "title": "beta/README.md", "section": "History",
                                   "source": "docs/beta/README.md"}
    assert "section" not in loaded[0].to_dict()  # empty: not written
    assert {d.source for d in loaded} == {"docs/alpha/README.md", "docs/beta/README.md", "docs/beta/headings.md"}
    assert "source" not in Document("p1", "t").to_dict()  # records of other corpora do not change


def test_stale_documents_are_told_by_their_source_record_not_their_id(tmp_path, caplog):
    docs = tmp_path / "docs"
    docs.mkdir()
    old = [Document("a.md#x", "x", source="docs/a.md"), Document("a.md#y", "y", source="docs/a.md"),
           Document("b#c.txt", "b", source="docs/b#c.txt"), Document("notes.txt", "from a .jsonl"),
           Document("d.txt", "other folder", source="notes/d.txt")]
    new = [Document("a.md#x", "x", source="docs/a.md")]
    assert stale_folder_ids(old, new, docs, sync=False) == ["a.md#y"]
    assert stale_folder_ids(old, new, docs, sync=True) == ["a.md#y", "b#c.txt"]
    legacy = [Document("a.md#y", "y"), Document("gone.txt", "g")]  # written before sources were recorded
    with caplog.at_level(logging.WARNING, logger="sirerag.corpus.folder"):
        assert stale_folder_ids(legacy, new, docs, sync=True, index="idx") == []
    assert "idx: its documents carry no record of the file they came from" in caplog.text
    assert "rebuild the index from the folder" in caplog.text


@pytest.fixture()
def folder(tmp_path):
    docs = tmp_path / "docs"
    (docs / "alpha").mkdir(parents=True)
    (docs / "beta").mkdir()
    (docs / "alpha" / "README.md").write_text(
        "# Alpha\nThe Alpha river rises in the Calder hills. Its water is cold all year.\n\n"
        "## Bridges\nThe Harwick Bridge crosses the Alpha river near Elmford.\n", encoding="utf-8")
    (docs / "beta" / "README.md").write_text(
        "# Beta\nBeta is an old volcano in the Andes. Its last eruption was in 1650.\n", encoding="utf-8")
    for i, topic in enumerate(["salmon", "otters", "herons", "willows"]):
        (docs / f"{topic}.txt").write_text(f"The {topic} of the Alpha valley were counted in {1990 + i}. "
                                           f"Most {topic} live near the Harwick Bridge.\n", encoding="utf-8")
    return docs


def _index_texts(path) -> str:
    """Every text the index holds: pool entries, documents and chunks (what a search or export can show)."""
    return "\n".join((path / name).read_text(encoding="utf-8")
                     for name in ("entries.jsonl", "documents.jsonl", "chunks.jsonl"))


def test_editing_a_file_and_adding_the_folder_leaves_no_trace_of_the_old_text(folder, tmp_path, capsys):
    out = tmp_path / "index"
    config = tmp_path / "build.toml"  # summaries long enough to quote every member: the old words reach them
    config.write_text("[tree]\nsummary_max_tokens = 400\n", encoding="utf-8")
    assert main(["build", str(folder), "--out", str(out), "--trees", "similarity", "--config", str(config),
                 "--quiet"]) == 0
    assert "last eruption was in 1650" in _index_texts(out)
    summaries = [json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "summary" and "1650" in e["text"] for e in summaries)  # the old words are summarised

    (folder / "beta" / "README.md").write_text(
        "# Beta\nBeta is a young volcano in Peru. It has never erupted.\n", encoding="utf-8")
    assert main(["add", str(out), str(folder), "--quiet"]) == 0
    assert "0 document(s) added, 1 updated, 0 removed" in capsys.readouterr().out
    texts = _index_texts(out)
    assert "1650" not in texts and "Andes" not in texts  # not in leaves, summaries, documents or chunks
    assert "never erupted" in texts
    with sirerag.Index.load(out) as index:
        titles = [r.title for r in index.search("Beta volcano", k=20, retriever="bm25") if r.kind == "leaf"]
        assert titles.count("beta/README.md") == 1  # one version of the file, not two
        assert not [r for r in index.search("1650 Andes eruption", k=20, retriever="bm25") if "1650" in r.text]


def test_a_removed_section_goes_and_sync_removes_deleted_files(folder, tmp_path, capsys):
    out = tmp_path / "index"
    assert main(["build", str(folder), "--out", str(out), "--trees", "none", "--quiet"]) == 0
    (folder / "alpha" / "README.md").write_text(
        "# Alpha\nThe Alpha river rises in the Calder hills. Its water is cold all year.\n", encoding="utf-8")
    (folder / "otters.txt").unlink()
    assert main(["add", str(out), str(folder), "--quiet"]) == 0  # without --sync: the deleted file stays
    assert "0 updated, 1 removed" in capsys.readouterr().out
    ids = [json.loads(line)["id"] for line in (out / "documents.jsonl").read_text().splitlines()]
    assert "alpha/README.md#alpha/bridges" not in ids and "otters.txt" in ids
    assert main(["add", str(out), str(folder), "--sync", "--quiet"]) == 0
    assert "0 updated, 1 removed" in capsys.readouterr().out
    ids = [json.loads(line)["id"] for line in (out / "documents.jsonl").read_text().splitlines()]
    assert ids == ["alpha/README.md#alpha", "beta/README.md#beta", "herons.txt", "salmon.txt", "willows.txt"]
    assert "otters" not in _index_texts(out)
    assert main(["add", str(out), str(folder), "--sync", "--quiet"]) == 0
    assert "unchanged" in capsys.readouterr().out


def test_sync_needs_a_folder(folder, tmp_path, capsys):
    corpus = tmp_path / "more.jsonl"
    corpus.write_text(json.dumps({"id": "x", "text": "More text."}) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="--sync keeps an index in step with a folder"):
        from sirerag.pipeline.update import update_index

        update_index(tmp_path / "no-index", add=corpus, sync=True)
    assert main(["add", str(tmp_path / "no-index"), str(corpus), "--sync"]) == 1
    assert "is not a folder" in capsys.readouterr().err


def _ids(index) -> list[str]:
    return [json.loads(line)["id"] for line in (index / "documents.jsonl").read_text().splitlines()]


def test_files_with_a_hash_in_their_name_are_synced(folder, tmp_path, capsys):
    (folder / "a#b.md").write_text("# Kettles\nThe Brassfield kettle whistles.\n\n## Lids\nIts lid is copper.\n",
                                   encoding="utf-8")
    (folder / "c#d.txt").write_text("The Dunmore lantern burns whale oil.\n", encoding="utf-8")
    out = tmp_path / "index"
    assert main(["build", str(folder), "--out", str(out), "--trees", "none", "--quiet"]) == 0
    assert {"a#b.md#kettles", "a#b.md#kettles/lids", "c#d.txt"} <= set(_ids(out))
    (folder / "a#b.md").unlink()
    (folder / "c#d.txt").unlink()
    assert main(["add", str(out), str(folder), "--sync", "--quiet"]) == 0
    assert "0 updated, 3 removed" in capsys.readouterr().out
    assert not [i for i in _ids(out) if "#b.md" in i or "#d.txt" in i]
    texts = _index_texts(out)
    assert "Brassfield" not in texts and "Dunmore" not in texts


def test_sync_removes_only_the_documents_that_folder_gave(folder, tmp_path, capsys):
    out = tmp_path / "index"
    assert main(["build", str(folder), "--out", str(out), "--trees", "none", "--quiet"]) == 0
    rows = tmp_path / "more.jsonl"  # an id that looks like a file of the folder
    rows.write_text(json.dumps({"id": "notes.txt", "text": "The Kinloch ferry leaves at noon."}) + "\n",
                    encoding="utf-8")
    notes = tmp_path / "notes"  # a second folder
    notes.mkdir()
    (notes / "ferry.txt").write_text("The Kinloch ferry carries twelve cars.\n", encoding="utf-8")
    assert main(["add", str(out), str(rows), "--quiet"]) == 0
    assert main(["add", str(out), str(notes), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["add", str(out), str(folder), "--sync", "--quiet"]) == 0
    assert "unchanged" in capsys.readouterr().out  # neither the .jsonl row nor the other folder's file
    assert {"notes.txt", "ferry.txt"} <= set(_ids(out))
    (notes / "ferry.txt").unlink()
    (notes / "dock.txt").write_text("The Kinloch dock was rebuilt.\n", encoding="utf-8")
    assert main(["add", str(out), str(notes), "--sync", "--quiet"]) == 0
    assert "1 document(s) added, 0 updated, 1 removed" in capsys.readouterr().out
    ids = _ids(out)
    assert "ferry.txt" not in ids and {"notes.txt", "dock.txt", "salmon.txt", "beta/README.md#beta"} <= set(ids)


def test_an_empty_file_blocks_neither_build_nor_sync(folder, tmp_path, capsys, caplog):
    (folder / "empty.txt").write_text("", encoding="utf-8")
    out = tmp_path / "index"
    with caplog.at_level(logging.WARNING, logger="sirerag.corpus"):
        assert main(["build", str(folder), "--out", str(out), "--trees", "none", "--quiet"]) == 0
    assert "skipped 1 empty file(s) (no text but white space): empty.txt" in caplog.text
    assert "empty.txt" not in _ids(out)
    (folder / "salmon.txt").write_text("   \n", encoding="utf-8")  # emptied: like a deleted file
    assert main(["add", str(out), str(folder), "--sync", "--quiet"]) == 0
    assert "0 updated, 1 removed" in capsys.readouterr().out
    assert "salmon.txt" not in _ids(out)


def test_links_out_of_the_folder_through_the_cli_and_the_api(folder, tmp_path):
    """The secret a link leads to reaches no file of the index, built or added in another process; the flag
    and the keyword read it."""
    secret = tmp_path / "secret.cfg"
    secret.write_text("api_key = sk-SECRET-4242\n", encoding="utf-8")
    (folder / "notes.txt").symlink_to(secret)
    (folder / "passwd.txt").symlink_to("/etc/passwd")
    (folder / ".env").write_text("TOKEN=dotenv-7781\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])

    def sirerag_cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sirerag.cli.main", *args], capture_output=True, text=True,
                              env=env, timeout=300)

    def every_byte(index: Path) -> bytes:
        return b"".join(p.read_bytes() for p in sorted(index.rglob("*")) if p.is_file())

    out = tmp_path / "index"
    done = sirerag_cli("build", str(folder), "--out", str(out), "--trees", "none", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "skipped 2 symbolic link(s) whose real path lies outside the folder: notes.txt, passwd.txt" in done.stderr
    assert b"SECRET-4242" not in every_byte(out) and b"root:" not in every_byte(out) and b"7781" not in every_byte(out)
    done = sirerag_cli("add", str(out), str(folder), "--sync", "--quiet")
    assert done.returncode == 0 and "unchanged" in done.stdout, done.stderr
    assert b"SECRET-4242" not in every_byte(out)
    done = sirerag_cli("add", str(out), str(folder), "--follow-outside-links", "--quiet")
    assert done.returncode == 0 and "2 document(s) added" in done.stdout, done.stderr
    assert b"SECRET-4242" in every_byte(out)
    done = sirerag_cli("add", str(out), str(folder), "--sync", "--quiet")  # without the flag: they go again
    assert done.returncode == 0 and "2 removed" in done.stdout, done.stderr
    assert {"notes.txt", "passwd.txt"}.isdisjoint(_ids(out))

    with sirerag.Index.build(folder, tmp_path / "api", trees=[], follow_outside_links=True) as index:
        assert "sk-SECRET-4242" in {d.id: d.text for d in index.documents()}["notes.txt"]
        assert index.manifest.config.sections["corpus"] == {"follow_outside_links": True}
    with sirerag.Index.build(folder, tmp_path / "api2", trees=[]) as index:
        assert "notes.txt" not in {d.id for d in index.documents()}
        index.add(folder, follow_outside_links=True)
        assert "notes.txt" in {d.id for d in index.documents()}
        with pytest.raises(ConfigError, match="corpus.follow_outside_links must be"):
            index.add(folder, follow_outside_links="yes")

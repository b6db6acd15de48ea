"""Folders that stay in sync: a folder's documents are keyed and titled by their relative path (two README files
stay two documents), Markdown is split at its headings with the heading path as provenance, an edited file is an
update that leaves no trace of the old text (leaves, summaries, documents, BM25), a removed section goes, and
``add --sync`` also removes the documents of deleted files."""
from __future__ import annotations

import json

import pytest

import sirerag
from sirerag.cli.main import main
from sirerag.core.errors import ConfigError
from sirerag.core.io.corpus import folder_file_of, load_corpus, stale_folder_ids
from sirerag.core.io.markdown import slugify, split_sections


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
                                   "title": "beta/README.md", "section": "History"}
    assert "section" not in loaded[0].to_dict()  # records of other corpora do not change
    assert folder_file_of("beta/README.md#history") == "beta/README.md" and folder_file_of("p0123") is None
    assert stale_folder_ids(["a.md#x", "a.md#y", "b.txt", "p1"], ["a.md#x"], ["a.md"], sync=False) == ["a.md#y"]
    assert stale_folder_ids(["a.md#x", "a.md#y", "b.txt", "p1"], ["a.md#x"], ["a.md"], sync=True) == \
        ["a.md#y", "b.txt"]


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

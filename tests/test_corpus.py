"""Reading a corpus: JSONL, a JSON list and a folder; derived ids (the bench scheme), duplicates dropped with
a warning, bad rows and files named with their line, non-UTF-8 input, bad paths."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from sirerag.core.errors import InputError
from sirerag.corpus.load import load_corpus
from sirerag.core.types import document_id

# shared data sits beside the repository: ../shared/bench relative to its root
BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench" / "musique" / "corpus.jsonl"


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_keeps_ids_order_and_derives_missing_ids(tmp_path, caplog):
    path = _jsonl(tmp_path / "c.jsonl", [
        {"id": "b", "title": "Bee", "text": "Bees make honey."},
        {"title": "Ant", "text": "Ants  carry\tleaves.", "url": "http://x"},
        {"text": "No title here."},
        {"_id": 7, "text": "A BEIR-style row."},
    ])
    with caplog.at_level(logging.INFO, logger="sirerag.corpus.load"):
        docs = load_corpus(path)
    assert [d.id for d in docs] == ["b", document_id("Ant", "Ants carry leaves."), document_id("", "No title here."), "7"]
    assert docs[1].text == "Ants  carry\tleaves."  # text is kept verbatim
    assert docs[2].title == "" and docs[1].content == "Ant\nAnts  carry\tleaves."
    assert "ignored field(s) ['url']" in caplog.text


@pytest.mark.skipif(not BENCH.is_file(), reason="bench data not available")
def test_bench_ids_match_the_bench_scheme(tmp_path):
    rows = [json.loads(line) for line in BENCH.read_text(encoding="utf-8").splitlines()[:50]]
    path = _jsonl(tmp_path / "noids.jsonl", [{"title": r["title"], "text": r["text"]} for r in rows])
    assert [d.id for d in load_corpus(path)] == [r["id"] for r in rows]


def test_json_list_and_folder(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"id": "x", "text": "one"}, {"text": "two", "title": "T"}]), encoding="utf-8")
    assert [(d.id, d.title, d.text) for d in load_corpus(path)] == [("x", "", "one"), (document_id("T", "two"), "T", "two")]

    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.md").write_text("# B\nbee text\n", encoding="utf-8")
    (folder / "a.txt").write_text("alpha text\n", encoding="utf-8")
    (folder / "sub" / "c.TXT").write_text("gamma", encoding="utf-8")
    (folder / "notes.csv").write_text("ignored", encoding="utf-8")
    (folder / ".hidden").mkdir()
    (folder / ".hidden" / "h.txt").write_text("hidden", encoding="utf-8")
    docs = load_corpus(folder)
    # keyed and titled by the relative path; a Markdown file split at its headings (tests/test_folder_sync.py)
    assert [(d.id, d.title, d.section, d.text) for d in docs] == [
        ("a.txt", "a.txt", "", "alpha text"), ("b.md#b", "b.md", "B", "bee text"),
        ("sub/c.TXT", "sub/c.TXT", "", "gamma")]


def test_exact_duplicates_are_dropped_with_a_warning(tmp_path, caplog):
    path = _jsonl(tmp_path / "d.jsonl", [
        {"title": "A", "text": "same"}, {"title": "B", "text": "other"}, {"title": "A", "text": "same"},
        {"id": "k", "text": "x"}, {"id": "k", "text": "x"},
    ])
    with caplog.at_level(logging.WARNING, logger="sirerag.corpus.load"):
        docs = load_corpus(path)
    assert [d.title for d in docs] == ["A", "B", ""]
    assert "dropped 2 exact duplicate document(s)" in caplog.text and "d.jsonl:3 repeats" in caplog.text


@pytest.mark.parametrize("content, message", [
    ('{"id": "a", "text": "x"}\n\n{"title": "t"}\n', r"c\.jsonl:3: row has no 'text' field"),
    ('{"text": 5}\n', r"c\.jsonl:1: 'text' must be a string, got a JSON number"),
    ('{"text": "ok"}\n{"text": "  \\n "}\n', r"c\.jsonl:2: 'text' is empty"),
    ('{"text": "ok"}\n{"text": \n', r"c\.jsonl:2: invalid JSON"),
    ('{"text": "ok"}\n["text"]\n', r"c\.jsonl:2: expected a JSON object .* got a JSON array"),
    ('{"text": "ok", "title": ["t"]}\n', r"c\.jsonl:1: 'title' must be a string"),
    ('{"text": "ok", "id": ""}\n', r"c\.jsonl:1: 'id' must be a non-empty string or an integer"),
    ('{"id": "a", "text": "x"}\n{"id": "b", "text": "y"}\n{"id": "a", "text": "z"}\n',
     r"c\.jsonl:3: id 'a' is already used by a different document \(.*c\.jsonl:1\)"),
    ("\n\n", r"c\.jsonl: empty corpus"),
])
def test_bad_jsonl_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "c.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        load_corpus(path)


def test_non_utf8_is_named(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"c\.jsonl:2: not valid UTF-8"):
        load_corpus(path)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("fine", encoding="utf-8")
    (folder / "b.txt").write_bytes(b"caf\xe9")
    with pytest.raises(InputError, match=r"b\.txt: not valid UTF-8"):
        load_corpus(folder)


def test_bad_json_rows_name_the_row_index(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"text": "ok"}, {"text": "ok2"}, {"title": "no text"}]), encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.json: row index 2: row has no 'text' field"):
        load_corpus(path)
    path.write_text(json.dumps({"text": "not a list"}), encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.json: expected a JSON list of objects .* got a JSON object"):
        load_corpus(path)
    path.write_text(json.dumps([{"text": "ok"}, "plain string"]), encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.json: row index 1: expected a JSON object"):
        load_corpus(path)
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.json: empty corpus"):
        load_corpus(path)
    path.write_text('[{"text": "ok"},\n {"text": }]', encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.json:2: invalid JSON"):
        load_corpus(path)


def test_bad_paths(tmp_path):
    with pytest.raises(InputError, match=r"corpus not found: .*missing\.jsonl"):
        load_corpus(tmp_path / "missing.jsonl")
    (tmp_path / "c.csv").write_text("id,text\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.csv: unsupported corpus format '\.csv'"):
        load_corpus(tmp_path / "c.csv")
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "data.csv").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match=r"empty: empty corpus: no \.txt or \.md files"):
        load_corpus(folder)
    (folder / "blank.txt").write_text(" \n", encoding="utf-8")  # skipped: nothing else to read
    with pytest.raises(InputError, match=r"empty: empty corpus \(no documents\)"):
        load_corpus(folder)
    (folder / ".notes.txt").write_text("hidden", encoding="utf-8")
    (folder / "blank.txt").unlink()
    with pytest.raises(InputError, match=r"empty: empty corpus: no \.txt or \.md files in this folder \(1 skipped"):
        load_corpus(folder)


# --- what a folder corpus reads: links, hidden entries, empty files, file names -------------------------------
def _linked_folder(tmp_path: Path) -> Path:
    """docs/ with a file, links out of it (a file, a folder, a broken one), a link inside it, hidden entries and
    a link to a hidden file; the secrets sit beside docs/."""
    (tmp_path / "secret.cfg").write_text("api_key = sk-SECRET-4242\n", encoding="utf-8")
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "diary.md").write_text("Dear diary, the vault code is 7781.\n", encoding="utf-8")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("Alpha is a river.\n", encoding="utf-8")
    (docs / "sub" / "b.md").write_text("Beta is a mountain.\n", encoding="utf-8")
    (docs / "notes.txt").symlink_to(tmp_path / "secret.cfg")
    (docs / "passwd.txt").symlink_to("/etc/passwd")
    (docs / "linked").symlink_to(tmp_path / "private", target_is_directory=True)
    (docs / "gone.txt").symlink_to(tmp_path / "missing.txt")
    (docs / "same.txt").symlink_to(docs / "a.txt")  # inside: read
    (docs / "loop").symlink_to(docs, target_is_directory=True)  # inside: not walked again
    (docs / ".env").write_text("TOKEN=dotenv-secret\n", encoding="utf-8")
    (docs / ".git").mkdir()
    (docs / ".git" / "config.txt").write_text("git secret\n", encoding="utf-8")
    (docs / "env.txt").symlink_to(docs / ".env")  # a link to a hidden file is hidden too
    return docs


def test_a_folder_reads_no_file_outside_it_unless_allowed(tmp_path, caplog):
    docs = _linked_folder(tmp_path)
    with caplog.at_level(logging.INFO, logger="sirerag.corpus"):
        loaded = load_corpus(docs)
    assert [d.id for d in loaded] == ["a.txt", "same.txt", "sub/b.md"]
    text = " ".join(d.text for d in loaded)
    assert "SECRET" not in text and "root:" not in text and "diary" not in text and "secret" not in text
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"{docs}: skipped 4 symbolic link(s) whose real path lies outside the folder: gone.txt, "
                        "linked, notes.txt, passwd.txt (corpus.follow_outside_links, --follow-outside-links, "
                        "reads them)"]  # one warning
    assert f"{docs}: skipped 3 hidden file(s) or folder(s) (names starting with '.'), e.g. .env, .git, env.txt" \
        in caplog.text

    allowed = load_corpus(docs, follow_outside_links=True)
    assert [d.id for d in allowed] == ["a.txt", "linked/diary.md", "notes.txt", "passwd.txt", "same.txt", "sub/b.md"]
    assert "sk-SECRET-4242" in allowed[2].text and "dotenv" not in " ".join(d.text for d in allowed)


def test_empty_files_and_unusable_names_are_skipped_and_named(tmp_path, caplog):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Alpha.\n", encoding="utf-8")
    (folder / "empty.txt").write_text("", encoding="utf-8")
    (folder / "blank.md").write_text(" \n\t\n", encoding="utf-8")
    (folder / "controls.txt").write_text("\x00\x01\n", encoding="utf-8")
    (folder / "line\nbreak.txt").write_text("A name with a newline.\n", encoding="utf-8")
    (Path(os.fsdecode(bytes(folder))) / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"Latin-1 name.\n")
    with caplog.at_level(logging.WARNING, logger="sirerag.corpus"):
        assert [d.id for d in load_corpus(folder)] == ["a.txt"]
    assert f"{folder}: skipped 3 empty file(s) (no text but white space): blank.md, controls.txt, empty.txt" \
        in caplog.text
    assert f"{folder}: skipped 2 file(s) whose name is not UTF-8 text or holds a control character (no document " \
           "id can be made of it): caf\\xe9.txt, line\\nbreak.txt" in caplog.text

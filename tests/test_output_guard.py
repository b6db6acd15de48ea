"""One output guard for every writing command (issue 25, item 1; :mod:`sirerag.core.io.guard`).

Nothing a user owns is replaced: a file sirerag did not write, a file inside an index, an input
of the same command, a folder of someone else's files. What sirerag wrote itself (a report, an
eval result, a run, a plot, a converted dataset, an export, an index) is recognised by its
marker and replaced. Symlinks are resolved first: a link to an earlier export stays a link.
Every refusal is one line naming the flag and the path, before any work, exit 1.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _llm_server import EmbeddingServer

from sirerag.cli.main import main
from sirerag.core.config import BuildConfig
from sirerag.core.errors import ConfigError
from sirerag.core.io.guard import check_cache_dir, check_file_out, written_by_sirerag
from sirerag.pipeline.build import build_index
from sirerag.pool.loaded import load_index

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "data"


@pytest.fixture(scope="module")
def embeddings():
    server = EmbeddingServer()
    yield server.url
    server.close()


@pytest.fixture()
def index_dir(tmp_path, embeddings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "title": f"T{i}", "text": f"Town {i} has {i} bridges."})
                              + "\n" for i in range(6)))
    config = BuildConfig(trees=()).with_overrides(chunking={"mode": "passage"},
                                                  embedder={"spec": f"openai:fake@{embeddings}"})
    out = tmp_path / "idx"
    build_index(corpus, out, config, show_progress=False)
    return out


def _error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sirerag {command}: error: "), err
    return err[0]


# --- inspect -----------------------------------------------------------------------------------

def test_inspect_never_replaces_a_users_file(index_dir, tmp_path, capsys):
    mine = tmp_path / "mine.txt"
    mine.write_text("my notes")
    assert main(["inspect", str(index_dir), "--out", str(mine), "--quiet"]) == 1
    assert "--out" in (line := _error(capsys, "inspect")) and "refusing to replace a file sirerag did not write" \
        in line and str(mine) in line
    assert mine.read_text() == "my notes"


@pytest.mark.parametrize("name", ["entries.jsonl", "manifest.json", "report.html"])
def test_inspect_never_writes_inside_an_index(index_dir, capsys, name):
    assert main(["inspect", str(index_dir), "--out", str(index_dir / name), "--quiet"]) == 1
    assert f"is inside the index {index_dir.resolve()}" in _error(capsys, "inspect")
    assert len(load_index(index_dir).pool) == 6 and not (index_dir / "report.html").exists()


def test_inspect_replaces_its_own_report(index_dir, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["inspect", str(index_dir), "--out", str(out), "--quiet"]) == 0
    assert '<meta name="generator" content="sirerag' in out.read_text()[:2000]
    assert main(["inspect", str(index_dir), "--out", str(out), "--quiet"]) == 0


# --- data convert --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_data_convert_never_replaces_a_users_files(tmp_path, capsys, name):
    out = tmp_path / "out"
    (out / name).parent.mkdir(parents=True)
    (out / name).write_text("mine\n")
    assert main(["data", "convert", "sirerag", str(BENCH / "corpus.jsonl"), str(BENCH / "questions.jsonl"),
                 "--out", str(out), "--to", "beir"]) == 1
    assert "holds files sirerag did not write" in _error(capsys, "data")
    assert (out / name).read_text() == "mine\n"


def test_data_convert_never_rewrites_its_own_input(tmp_path, capsys):
    beir = tmp_path / "self"
    assert main(["data", "convert", "sirerag", str(BENCH / "corpus.jsonl"), str(BENCH / "questions.jsonl"),
                 "--out", str(beir), "--to", "beir"]) == 0
    before = {p: p.read_bytes() for p in beir.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["data", "convert", "beir", str(beir), "--split", "dev", "--to", "beir", "--out", str(beir)]) == 1
    assert f"--out {beir} is the input" in _error(capsys, "data")
    assert {p: p.read_bytes() for p in beir.rglob("*") if p.is_file()} == before


def test_data_convert_never_empties_an_input_in_the_out_folder(tmp_path, capsys):
    s2 = tmp_path / "s2"
    s2.mkdir()
    for name in ("corpus.jsonl", "questions.jsonl"):
        shutil.copyfile(BENCH / name, s2 / name)
    questions = (s2 / "questions.jsonl").read_bytes()
    assert main(["data", "convert", "sirerag", str(s2 / "corpus.jsonl"), str(s2 / "questions.jsonl"),
                 "--out", str(s2), "--split", "train"]) == 1
    assert f"--out {s2} holds the input" in _error(capsys, "data")
    assert (s2 / "questions.jsonl").read_bytes() == questions


def test_data_convert_replaces_a_folder_it_wrote(tmp_path):
    out = tmp_path / "conv"
    args = ["data", "convert", "sirerag", str(BENCH / "corpus.jsonl"), str(BENCH / "questions.jsonl"),
            "--out", str(out)]
    assert main(args) == 0 and main(args) == 0
    marker = json.loads((out / ".sirerag-dataset.json").read_text())
    assert marker["files"] == ["corpus.jsonl", "questions.jsonl"]


# --- export ----------------------------------------------------------------------------------

def test_export_overwrite_through_a_symlink_replaces_the_target_and_keeps_the_link(index_dir, tmp_path):
    real = tmp_path / "exports" / "v1"
    assert main(["export", str(index_dir), "--format", "beir", "--out", str(real)]) == 0
    link = tmp_path / "current"
    link.symlink_to(real)
    assert main(["export", str(index_dir), "--format", "jsonl", "--out", str(link), "--overwrite"]) == 0
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert json.loads((real / "export.json").read_text())["format"] == "jsonl"
    assert not list(tmp_path.glob(".current.*")) and not list(real.parent.glob(".v1.tmp-*"))


# --- eval, compare, build --------------------------------------------------------------------

def _questions(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "q1", "question": "How many bridges has Town 2?", "answers": ["2"],
                                "gold_passage_ids": ["d2"]}) + "\n")
    return path


def test_eval_outputs_are_checked_before_any_work(index_dir, tmp_path, capsys):
    questions = _questions(tmp_path)
    mine = tmp_path / "results.json"
    mine.write_text("{\"mine\": true}")
    cases = [(["--json", str(mine)], "refusing to replace a file sirerag did not write"),
             (["--json", str(questions)], "is the input"),
             (["--run", str(index_dir / "x.trec")], "is inside the index"),
             (["--json", str(tmp_path / "a"), "--run", str(tmp_path / "a")], "is also another output")]
    for extra, message in cases:
        assert main(["eval", str(index_dir), "--questions", str(questions), "--retriever", "bm25", "--quiet",
                     *extra]) == 1
        assert message in _error(capsys, "eval")
    assert mine.read_text() == "{\"mine\": true}"
    out, run = tmp_path / "r.json", tmp_path / "r.trec"
    for _ in range(2):  # its own result and run are replaced
        assert main(["eval", str(index_dir), "--questions", str(questions), "--retriever", "bm25", "--quiet",
                     "--json", str(out), "--run", str(run)]) == 0
    assert json.loads(out.read_text())["generator"].startswith("sirerag")
    assert written_by_sirerag(run)


def test_compare_plot_never_replaces_an_input(tmp_path, capsys):
    result = tmp_path / "a.json"
    result.write_text(json.dumps({"generator": "sirerag", "retriever": "bm25", "n_questions": 1,
                                  "passage_recall@2": 1.0}))
    assert main(["compare", str(result), "--plot", str(result)]) == 1
    assert "--plot" in (line := _error(capsys, "compare")) and "is the input" in line


def test_a_plot_written_by_sirerag_is_recognised(tmp_path):
    pytest.importorskip("matplotlib")
    from sirerag.report.plots import plot_results

    out = tmp_path / "p.png"
    plot_results([{"retriever": "bm25", "index": "x", "passage_recall@2": 0.5, "passage_recall@5": 0.7,
                  "answer_recall@256": 0.4, "answer_recall@512": 0.6}], out)
    assert written_by_sirerag(out)
    (tmp_path / "other.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    assert not written_by_sirerag(tmp_path / "other.png")


def test_build_never_writes_inside_an_index_or_over_its_corpus(index_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    assert main(["build", str(corpus), "--out", str(index_dir / "sub"), "--trees", "none", "--quiet"]) == 1
    assert "is inside the index" in _error(capsys, "build")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("A text.")
    assert main(["build", str(folder), "--out", str(folder), "--trees", "none", "--quiet"]) == 1
    assert f"--out {folder} is the input" in _error(capsys, "build")


# --- --cache ----------------------------------------------------------------------------------

def test_a_cache_inside_an_index_is_refused_before_work(index_dir, tmp_path, capsys):
    corpus = tmp_path / "more.jsonl"
    corpus.write_text(json.dumps({"id": "n1", "title": "N", "text": "A new town."}) + "\n")
    before = sorted(p.name for p in (index_dir / "bm25").iterdir())
    assert main(["add", str(index_dir), str(corpus), "--cache", str(index_dir / "bm25"), "--quiet"]) == 1
    assert f"--cache {index_dir / 'bm25'} is inside the index" in _error(capsys, "add")
    assert sorted(p.name for p in (index_dir / "bm25").iterdir()) == before
    assert check_cache_dir(index_dir / "cache" / "x") == (index_dir / "cache" / "x").resolve()
    with pytest.raises(ConfigError, match="is an index folder"):
        check_cache_dir(index_dir)


def test_the_root_is_never_a_cache(tmp_path):
    with pytest.raises(ConfigError, match=r"^--cache / is the file-system root; sirerag writes its caches there"):
        check_cache_dir("/")
    with pytest.raises(ConfigError, match=r"^--reader-cache / is the file-system root"):
        check_cache_dir("/", option="--reader-cache")


def _cache_commands(index: Path, corpus: Path, questions: Path, out: Path, cache: str) -> dict[str, list[str]]:
    return {
        "build": ["build", str(corpus), "--out", str(out), "--trees", "none", "--cache", cache],
        "build --dry-run": ["build", str(corpus), "--dry-run", "--trees", "none", "--cache", cache],
        "add": ["add", str(index), str(corpus), "--cache", cache],
        "remove": ["remove", str(index), "--ids", "d0-0", "--cache", cache],
        "ask": ["ask", str(index), "Which passage?", "--llm", "openai:m@http://127.0.0.1:9/v1",
                "--reader-cache", cache],
        "eval": ["eval", str(index), "--questions", str(questions), "--reader", "openai:m@http://127.0.0.1:9/v1",
                 "--reader-cache", cache],
    }


@pytest.mark.parametrize("cache", ["~", "."])
@pytest.mark.parametrize("command", ["build", "build --dry-run", "add", "remove", "ask", "eval"])
def test_no_cache_of_any_command_is_the_home_or_current_folder(tmp_path, monkeypatch, capsys, command, cache):
    from test_index_safety import make_index

    index = make_index(tmp_path / "idx")
    corpus = tmp_path / "more.jsonl"
    corpus.write_text(json.dumps({"id": "n1", "title": "N", "text": "A new town."}) + "\n")
    questions = _questions(tmp_path)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    before = (index / "manifest.json").read_bytes()
    args = _cache_commands(index, corpus, questions, tmp_path / "out", cache)[command]
    assert main(args + ["--quiet"]) == 1
    what = "your home folder" if cache == "~" else "the current folder"
    option = "--reader-cache" if command in ("ask", "eval") else "--cache"
    assert f"{option} {home if cache == '~' else cache} is {what}" in _error(capsys, command.split()[0])
    assert list(home.iterdir()) == list(work.iterdir()) == [] and not (tmp_path / "out").exists()
    assert (index / "manifest.json").read_bytes() == before


@pytest.mark.parametrize("command", ["add", "remove"])
def test_add_and_remove_name_their_own_argument_not_out(tmp_path, capsys, command):
    from test_index_safety import make_index

    index = make_index(tmp_path / "idx")
    (index / "notes.txt").write_text("mine")
    corpus = tmp_path / "more.jsonl"
    corpus.write_text(json.dumps({"id": "n1", "title": "N", "text": "A new town."}) + "\n")
    args = ["add", str(index), str(corpus)] if command == "add" else ["remove", str(index), "--ids", "d0-0"]
    assert main(args + ["--quiet"]) == 1
    error = _error(capsys, command)
    assert f"INDEX {index} is a sirerag index that also holds files sirerag did not write (notes.txt); " \
           f"sirerag {command} replaces the whole folder: move those files out of it" in error
    assert "--out" not in error and "a build" not in error
    assert (index / "notes.txt").read_text() == "mine"


def test_a_file_output_resolves_symlinks_and_refuses_folders(tmp_path):
    target = tmp_path / "real.json"
    target.write_text(json.dumps({"generator": "sirerag 0"}))
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert check_file_out(link, "--json") == target.resolve()
    with pytest.raises(ConfigError, match="--json .* is a folder"):
        check_file_out(tmp_path, "--json")

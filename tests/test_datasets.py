"""``sirerag data convert``: handmade fixtures shaped like each format's release files.

The first MuSiQue, HotpotQA and 2Wiki records are real questions of shared/bench rebuilt in
their original record shape (paragraph texts from the bench corpus, HotpotQA sentences with
their leading space, 2Wiki sentences stripped), so their passage ids must be bench's ids.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from sirerag.cli.main import main
from sirerag.datasets import convert, write
from sirerag.core.errors import ConfigError, InputError
from sirerag.core.types import document_id

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "data" / "datasets"
BENCH = ROOT.parent / "shared" / "bench"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_musique_ids_gold_answers_and_drops():
    conv = convert("musique", [FIX / "musique" / "musique_ans_v1.0_dev.jsonl"])
    first, second = conv.questions
    assert first == {
        "id": "2hop__150763_14904", "question": first["question"], "answers": ["G. Stanley Hall", "Stanley Hall"],
        "gold_titles": ["Journal of Psychotherapy Integration", "Adolescence"],
        "gold_passage_ids": ["p7976b1e35e0aab61", "pda9107f338384958"],  # bench's ids for this question
        "source": "musique_ans_v1.0_dev.jsonl", "split": "dev", "hops": 2}
    assert second["hops"] == 3 and second["gold_titles"] == ["Lake Tilde", "River Quill", "Brackwater"]
    assert conv.dropped == {"duplicate question id": 1, "no supporting paragraph": 1,
                            "paragraph with empty text": 1, "unanswerable (answerable: false)": 1}
    # 4 + 3 paragraphs (one repeated, one empty); the dropped questions' paragraphs are not in the corpus
    assert len(conv.corpus) == 7 and conv.merged == 1
    assert "Stray" not in {p["title"] for p in conv.corpus}
    brack = next(p for p in conv.corpus if p["title"] == "Brackwater")
    assert brack["text"] == "Brackwater is a market town founded in 1204 by Abbot Odo."  # white space collapsed
    assert all(p["id"] == document_id(p["title"], p["text"]) for p in conv.corpus)


def test_hotpotqa_joins_sentences_and_keeps_context_order():
    conv = convert("hotpotqa", [FIX / "hotpotqa" / "hotpot_dev_distractor_v1.json"])
    first, second = conv.questions
    # supporting_facts name Alû first; gold follows the context, as in shared/bench
    assert first["gold_titles"] == ["Lilu (mythology)", "Alû"]
    assert first["gold_passage_ids"] == ["p66227a60515e1472", "p1bbfe3b70d1d2e5e"]
    assert first["type"] == "bridge" and first["answers"] == ["a spirit"]
    arthur = next(p for p in conv.corpus if p["title"] == "Arthur? Arthur!")
    assert arthur["id"] == "p361b418ec131580b" and arthur["text"].startswith("Arthur? Arthur! is a 1969")
    assert second["answers"] == ["yes"] and len(second["gold_passage_ids"]) == 2
    assert conv.dropped == {"supporting title not in the context": 1}
    assert [p["title"] for p in conv.corpus][:4] == ["Demon Dice", "Lilu (mythology)", "Arthur? Arthur!", "Alû"]


def test_2wiki_ids_and_drops():
    conv = convert("2wiki", [FIX / "2wiki" / "dev.json"])
    first, second = conv.questions
    assert first["gold_passage_ids"] == ["p405b34dd075c7b32", "p52e1bea05b7d86e0"]  # bench's ids
    assert first["type"] == "compositional" and first["split"] == "dev"
    lake = next(p for p in conv.corpus if p["title"] == "Lake Tilde")
    assert lake["text"] == "Lake Tilde is 40 metres deep. It is in Marrow."  # stripped sentences joined by a space
    assert second["gold_titles"] == ["Lake Tilde", "Lake Quill"]
    assert conv.dropped == {"no supporting paragraph": 1}
    assert len(conv.corpus) == 7


def test_hipporag_pair_three_record_shapes():
    pair = [FIX / "hipporag" / "sample.json", FIX / "hipporag" / "sample_corpus.json"]  # any order
    conv = convert("hipporag", pair, split="dev")
    ids = {p["title"] + "|" + p["text"][:10]: p["id"] for p in conv.corpus}
    assert len(conv.corpus) == 6 and conv.merged == 1  # 'Lake Tilde' twice, differing only in white space
    musique, hotpot, contexts = conv.questions
    assert musique["answers"] == ["Abbot Odo", "Odo"] and musique["hops"] == 3
    assert musique["gold_passage_ids"] == [ids["Lake Tilde|Lake Tilde"], ids["River Quill|The River "],
                                           ids["Brackwater|Brackwater"]]
    assert hotpot["id"] == "5a0000000000000000000002" and hotpot["type"] == "comparison"
    assert hotpot["gold_titles"] == ["Quill Bridge", "Tilde Bridge"]
    assert contexts["answers"] == ["1230"] and contexts["gold_titles"] == ["Abbot Odo"]
    assert all(q["split"] == "dev" for q in conv.questions)
    assert conv.dropped == {"gold passage not in the corpus file": 1}
    # the corpus file is the corpus: a passage no question points at stays
    assert "Tilde Bridge" in {p["title"] for p in conv.corpus}


def test_beir_folder_qrels_and_drops():
    conv = convert("beir", [FIX / "beir"])
    q1, q2, q5 = conv.questions
    assert [q1["id"], q2["id"], q5["id"]] == ["q1", "q2", "q5"]
    assert all(q["answers"] == [] for q in conv.questions) and any("answer recall" in n for n in conv.notes)
    lake = document_id("Lake Tilde", "Lake Tilde is a lake in the fictional county of Marrow. It feeds the River Quill.")
    # d4 (same text as d1 up to white space) is d1's passage; score 0 (d3) is not gold; score 2 is
    assert q1["gold_passage_ids"] == [lake, document_id("River Quill", "The River Quill flows from Lake Tilde to "
                                                                       "the town of Brackwater.")]
    assert q2["gold_titles"] == [] and len(q2["gold_passage_ids"]) == 1
    assert conv.dropped == {"judgement for a query not in queries.jsonl": 1, "paragraph with empty text": 1,
                            "query without a relevant document in qrels/test.tsv": 2,
                            "relevant document not in the corpus (or empty)": 2}
    assert len(conv.corpus) == 4 and conv.merged == 1


def test_ids_keeps_those_questions_in_order_with_their_paragraphs(tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("3hop1__101_202_303\nnot-a-question\n")
    conv = convert("musique", [FIX / "musique" / "musique_ans_v1.0_dev.jsonl"], ids=["3hop1__101_202_303",
                                                                                     "not-a-question"])
    assert [q["id"] for q in conv.questions] == ["3hop1__101_202_303"]
    assert [p["title"] for p in conv.corpus] == ["Lake Tilde", "River Quill", "Journal of Mathematical Physics",
                                                 "Brackwater"]
    assert conv.dropped["question not in --ids"] == 1
    assert conv.dropped["--ids entry not in the input (not a question)"] == 1
    for ids_file in (ids, FIX / "musique" / "musique_ans_v1.0_dev.jsonl"):  # a list, or a questions file's ids
        out = tmp_path / ids_file.suffix.strip(".")
        assert main(["data", "convert", "musique", str(FIX / "musique" / "musique_ans_v1.0_dev.jsonl"),
                     "--ids", str(ids_file), "--out", str(out)]) == 0
        kept = [q["id"] for q in _rows(out / "questions.jsonl")]
        assert kept == (["3hop1__101_202_303"] if ids_file == ids else ["2hop__150763_14904", "3hop1__101_202_303"])


def test_data_to_beir_and_back_is_identical(tmp_path, capsys):
    data = ROOT / "data"
    assert main(["data", "convert", "sirerag", str(data / "corpus.jsonl"), str(data / "questions.jsonl"),
                 "--out", str(tmp_path / "beir"), "--to", "beir"]) == 0
    assert (tmp_path / "beir" / "qrels" / "dev.tsv").read_text().startswith("query-id\tcorpus-id\tscore\n")
    assert main(["data", "convert", "beir", str(tmp_path / "beir"), "--split", "dev", "--out",
                 str(tmp_path / "back")]) == 0
    for name in ("corpus.jsonl", "questions.jsonl"):
        assert (tmp_path / "back" / name).read_bytes() == (data / name).read_bytes()
    printed = capsys.readouterr().out
    assert "beir: 40 questions, 300 passages" in printed and "sha256 " in printed


@pytest.mark.skipif(not BENCH.is_dir(), reason="needs ../shared/bench")
@pytest.mark.parametrize("dataset", ["musique", "2wikimultihopqa", "hotpotqa"])
def test_writer_reproduces_shared_bench_bytes(dataset, tmp_path):
    src = BENCH / dataset
    conv = convert("sirerag", [src / "corpus.jsonl", src / "questions.jsonl"])
    assert conv.dropped == {} and conv.merged == 0
    for path in write(conv, tmp_path):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256((src / path.name).read_bytes()).hexdigest()


@pytest.mark.parametrize("fmt, name, text, message", [
    ("musique", "m_dev.jsonl", '{"id": "a", "question": "q", "answer": "x", "paragraphs": []}\n{"id": ',
     r"m_dev\.jsonl:2: invalid JSON"),
    ("musique", "m_dev.jsonl", '\n{"id": "2hop__1_2", "question": "q", "answer": "x"}\n',
     r"m_dev\.jsonl:2 \(id 2hop__1_2\): missing field 'paragraphs'"),
    ("musique", "m_dev.jsonl", '{"id": "a", "question": "q", "answer": "x", "paragraphs": [{"title": "t", '
     '"paragraph_text": 3}]}\n', r"m_dev\.jsonl:1 \(id a\): paragraphs\[0\]: field 'paragraph_text' must be a "
     r"JSON string, got a JSON number"),
    ("hotpotqa", "h.json", '[{"_id": "x", "question": "q", "answer": "a", "supporting_facts": [], '
     '"context": [["t", "not a list"]]}]', r"h\.json: record 0 \(id x\): context\[0\] must be \[title, "),
    ("2wiki", "w.json", '[\n{"_id": "x",\n "question": }\n]', r"w\.json:3: invalid JSON"),
    ("2wiki", "w.json", '{"_id": "x"}', r"w\.json: expected a JSON list of records, got a JSON object"),
])
def test_malformed_input_names_file_and_line(tmp_path, fmt, name, text, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        convert(fmt, [path])


def test_malformed_qrels_and_wrong_inputs(tmp_path):
    folder = tmp_path / "b"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "x"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "y"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\thigh\n")
    with pytest.raises(InputError, match=r"test\.tsv:3: score must be an integer, got 'high'"):
        convert("beir", [folder])
    with pytest.raises(InputError, match=r"qrels file not found: .*dev\.tsv \(choose the split with --split\)"):
        convert("beir", [folder], split="dev")
    with pytest.raises(InputError, match=r"hipporag: expected two files, NAME_corpus\.json and NAME\.json"):
        convert("hipporag", [FIX / "hipporag" / "sample.json"])
    with pytest.raises(ConfigError, match=r"format must be one of \['2wiki', 'beir', "):
        convert("squad", [folder])


def test_cli_reports_errors_with_exit_code_1(tmp_path, capsys):
    bad = tmp_path / "dev.json"
    bad.write_text('[{"_id": "x", "question": "q", "answer": "a", "context": [], "supporting_facts": [[1, 0]]}]')
    assert main(["data", "convert", "2wiki", str(bad), "--out", str(tmp_path / "o")]) == 1
    assert "dev.json: record 0 (id x): supporting_facts[0] must be [title, sentence index]" in capsys.readouterr().err

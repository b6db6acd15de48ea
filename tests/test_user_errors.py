"""Errors a user can cause end in one line and exit code 1, before any work starts.

Reproductions of issue 11 (validation holes, an LLM endpoint that is down, empty queries,
control characters, large passages, the bm25s DEBUG line). Builds here use a local fake
embeddings endpoint, so no model is loaded.
"""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import typing
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from _llm_server import EmbeddingServer, free_port

from finetune.config import LoRAConfig, ModelConfig, OptimConfig, TrainConfig
from sirerag.cli.main import main
from sirerag.core.config import BuildConfig, ChunkingConfig, load_config
from sirerag.core.config.sections import SECTIONS as BUILD_SECTIONS
from sirerag.core.errors import ConfigError, InputError, SireragError
from sirerag.corpus.load import load_corpus
from sirerag.llm.base import LLMCallError
from sirerag.retrievers.bm25 import BM25Retriever
from sirerag.retrievers.dense import DenseRetriever

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
SECRET = "sk-test-w11b-9f8e7d6c5b4a"


def _rows(n: int = 8) -> list[dict]:
    with open(DATA / "corpus.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for _, line in zip(range(n), fh)]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _one_error_line(capsys: pytest.CaptureFixture, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sirerag {command}: error: "), err
    return err[0]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return _write_jsonl(tmp_path_factory.mktemp("corpus") / "corpus.jsonl", _rows())


@pytest.fixture(scope="module")
def embeddings_url():
    server = EmbeddingServer()
    yield server.url
    server.close()


@pytest.fixture(scope="module")
def index(corpus, embeddings_url, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("index") / "idx"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", SECRET)
        assert main(["build", str(corpus), "--out", str(out), "--trees", "none", "--chunking", "passage",
                     "--embedder", f"openai:fake@{embeddings_url}", "--quiet"]) == 0
    return out


# --- validation that matches types --------------------------------------------------------

@pytest.mark.parametrize("toml, message", [
    ('[clustering]\nthreshold = "0.1"\n', r"\[clustering\] threshold must be a number, got '0\.1'"),
    ('[clustering]\nthreshold = "abc"\n', r"\[clustering\] threshold must be a number, got 'abc'"),
    ('[relatedness]\nsummaries = "no"\n', r"\[relatedness\] summaries must be true or false, got 'no'"),
    ("seed = true\n", r"seed must be an integer, got True"),
    ("seed = 4294967296\n", r"seed must be an integer from 0 to 2\*\*32 - 1, got 4294967296"),
    ("[llm]\ntimeout = nan\n", r"\[llm\] timeout must be a number, got nan"),
    ("[tree]\nlevels = 3.0\n", r"\[tree\] levels must be an integer, got 3\.0"),
    ('trees = ["similarity", 1]\n', r"trees must be a list of strings"),
])
def test_toml_values_of_the_wrong_type_or_range_are_config_errors(tmp_path, toml, message):
    path = tmp_path / "build.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=message):
        load_config(path).validate()


def _wrong_values(hint: object) -> list[object]:
    """Values of the wrong type for a field annotated ``hint``."""
    base = {bool: ["no", 1, None], int: [True, "1", 1.5, None], float: ["0.1", True, None, float("inf")],
            str: [3, None, b"x"]}
    if hint in base:
        return base[hint]
    if typing.get_origin(hint) is tuple:
        return [["a"], ("a", 3) if typing.get_args(hint)[0] is str else ("a",)]
    return [3] if str in typing.get_args(hint) else []  # str | None


SECTIONS = [(name, cls) for name, cls in BUILD_SECTIONS.items()] + [("model", ModelConfig), ("lora", LoRAConfig),
                                                               ("optim", OptimConfig)]


@pytest.mark.parametrize("name, cls", SECTIONS, ids=[n for n, _ in SECTIONS])
def test_every_field_of_every_section_is_checked_for_its_exact_type(name, cls):
    hints = typing.get_type_hints(cls)
    checked = 0
    for f in fields(cls):
        for value in _wrong_values(hints[f.name]):
            with pytest.raises(ConfigError, match=rf"^{name}\.{f.name} must be .*, got "):
                cls(**{f.name: value}).validate()
            checked += 1
    assert checked >= len(fields(cls))


def test_seed_range_and_types_at_the_top_level():
    assert BuildConfig(seed=2**32 - 1).validate().seed == 2**32 - 1
    for seed, message in ((2**32, r"from 0 to 2\*\*32 - 1, got 4294967296"), (-1, "got -1"),
                          (True, "seed must be an integer, got True")):
        with pytest.raises(ConfigError, match=message):
            BuildConfig(seed=seed).validate()
    with pytest.raises(ConfigError, match=r"optim\.seed must be an integer from 0 to 2\*\*32 - 1"):
        TrainConfig(optim=OptimConfig(seed=2**32)).validate()
    with pytest.raises(ConfigError, match=r"--set 'optim.epochs=abc' epochs must be a number, got 'abc'"):
        TrainConfig().with_overrides(["optim.epochs=abc"])


@pytest.mark.parametrize("args, message", [
    (["--seed", "4294967296"], r"seed must be an integer from 0 to 2\*\*32 - 1, got 4294967296"),
    (["--config", "BAD"], r"\[clustering\] threshold must be a number, got '0\.1'"),
])
def test_build_stops_before_any_work_on_a_bad_setting(corpus, tmp_path, capsys, args, message):
    bad = tmp_path / "bad.toml"
    bad.write_text('[clustering]\nthreshold = "0.1"\n')
    out = tmp_path / "idx"
    args = [str(bad) if a == "BAD" else a for a in args]
    assert main(["build", str(corpus), "--out", str(out), "--quiet", *args]) == 1
    assert re.search(message, _one_error_line(capsys, "build"))
    assert not out.exists()  # nothing was written: the check ran first


# --- every user error is a SireragError, one line, exit 1 ---------------------------------

def test_an_llm_endpoint_that_is_down_is_one_line_naming_it_without_secrets(corpus, embeddings_url, tmp_path,
                                                                            capsys, monkeypatch):
    assert issubclass(LLMCallError, SireragError)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    config = tmp_path / "llm.toml"
    config.write_text("[llm]\nmax_retries = 0\ntimeout = 10.0\n")
    port = free_port()  # nothing listens there
    code = main(["build", str(corpus), "--out", str(tmp_path / "idx"), "--trees", "similarity",
                 "--chunking", "passage", "--embedder", f"openai:fake@{embeddings_url}", "--config", str(config),
                 "--llm", f"openai:m@http://user:pw-w11b@127.0.0.1:{port}/v1", "--quiet"])
    assert code == 1
    line = _one_error_line(capsys, "build")
    assert f"openai:m at http://127.0.0.1:{port}/v1: connection error" in line
    assert SECRET not in line and "pw-w11b" not in line


def test_os_errors_on_user_paths_are_one_line(corpus, embeddings_url, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    a_file = tmp_path / "afile"
    a_file.write_text("mine")
    for out in (a_file, a_file / "sub"):
        assert main(["build", str(corpus), "--out", str(out), "--trees", "none", "--chunking", "passage",
                     "--embedder", f"openai:fake@{embeddings_url}", "--quiet"]) == 1
        assert str(a_file) in _one_error_line(capsys, "build")
    assert a_file.read_text() == "mine"


def test_debug_shows_the_traceback(corpus, tmp_path):
    with pytest.raises(ConfigError, match=r"seed must be an integer from 0 to 2\*\*32 - 1"):
        main(["--debug", "build", str(corpus), "--out", str(tmp_path / "idx"), "--seed", "4294967296"])
    with pytest.raises(ConfigError, match=r"seed must be"):
        main(["build", str(corpus), "--out", str(tmp_path / "idx"), "--seed", "4294967296", "--debug"])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "sirerag.cli.main", "--debug", "build", str(corpus), "--out",
                           str(tmp_path / "idx"), "--seed", "4294967296"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Traceback") and "sirerag.core.errors.ConfigError: seed must be" in proc.stderr


def test_an_embedding_dimension_mismatch_is_a_sirerag_error():
    class Embedder:
        spec, dim = "fake", 5

    with pytest.raises(SireragError, match="has dim 5 but the pool embeddings have dim 3"):
        DenseRetriever(Embedder(), ["a", "b"], np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(SireragError, match=r"embeddings of shape \(2, 3\) for 3 entries"):
        DenseRetriever(Embedder(), ["a", "b", "c"], np.zeros((2, 3), dtype=np.float32))


# --- input edge cases ---------------------------------------------------------------------

@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_an_empty_query_is_an_error(index, capsys, query):
    assert main(["search", str(index), query]) == 1
    assert "query must be a question or keywords" in _one_error_line(capsys, "search")


def test_retrievers_refuse_empty_queries():
    bm25 = BM25Retriever(["a", "b"], ["the painter Clara Peeters", "the river Scheldt"])
    assert bm25.search("painter", k=1)[0].entry_id == "a"
    with pytest.raises(InputError, match="query must be a question or keywords, got ' '"):
        bm25.search(" ")

    class Embedder:
        spec, dim = "fake", 2

        def encode_queries(self, texts):
            return np.ones((len(texts), 2), dtype=np.float32)

    dense = DenseRetriever(Embedder(), ["a"], np.ones((1, 2), dtype=np.float32))
    with pytest.raises(InputError, match="query 2 must be a question or keywords, got ''"):
        dense.search_many(["painter", ""])


def test_an_empty_question_in_eval_is_an_error(index, tmp_path, capsys):
    questions = _write_jsonl(tmp_path / "q.jsonl", [{"question": " ", "answers": ["x"], "gold_passage_ids": []}])
    assert main(["eval", str(index), "--questions", str(questions)]) == 1
    assert "question row 1: 'question' is empty" in _one_error_line(capsys, "eval")
    assert main(["eval", str(index), "--questions", str(questions), "--limit", "0"]) == 1
    assert "--limit must be a positive integer, got 0" in _one_error_line(capsys, "eval")


def test_control_characters_are_removed_and_counted(tmp_path, caplog):
    rows = _rows(3)
    rows[1]["text"] = "Clara\x00 Peeters\x1b[0m was\x0ca painter.\r\nShe\tlived in Antwerp.\x7f"
    rows[2]["title"] = "Title\x01"
    path = _write_jsonl(tmp_path / "c.jsonl", rows)
    with caplog.at_level(logging.WARNING, logger="sirerag.corpus.load"):
        docs = load_corpus(path)
    assert docs[1].text == "Clara Peeters[0m was a painter.\r\nShe\tlived in Antwerp."
    assert docs[2].title == "Title" and docs[0].text == rows[0]["text"]
    assert f"{path}: removed 5 control character(s) from 2 document(s), e.g. {path}:2" in caplog.text
    rows[0]["text"] = "\x00\x01 \x02"  # nothing left once cleaned
    with pytest.raises(InputError, match=r"c\.jsonl:1: 'text' is empty"):
        load_corpus(_write_jsonl(path, rows))


def test_a_passage_over_the_size_limit_gets_a_warning_with_its_line(tmp_path, caplog):
    rows = _rows(3)
    rows[2]["text"] = "word " * 300
    path = _write_jsonl(tmp_path / "big.jsonl", rows)
    with caplog.at_level(logging.WARNING, logger="sirerag.corpus.load"):
        load_corpus(path)
        assert "over" not in caplog.text  # 1 MB by default
        load_corpus(path, warn_passage_bytes=1000)
    assert f"{path}:3: passage of 1500 bytes is over 1000 (chunking.warn_passage_bytes)" in caplog.text
    assert ChunkingConfig().warn_passage_bytes == 1_000_000
    with pytest.raises(ConfigError, match="chunking.warn_passage_bytes must be a positive number of bytes"):
        ChunkingConfig(warn_passage_bytes=0).validate()


def test_no_debug_line_at_the_default_log_level(index):
    title = _rows(1)[0]["title"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "sirerag.cli.main", "search", str(index), title,
                           "--retriever", "bm25", "-k", "2"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and title in proc.stdout
    assert "DEBUG" not in proc.stderr, proc.stderr

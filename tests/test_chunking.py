"""Sentence splitting and chunking: token chunks that keep sentences whole, greedy packing, overlong
sentences split on clauses, words then tokens, passage mode, stable chunk ids, config errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from sirerag.text.chunking import chunk_documents, sentence_spans, split_text
from sirerag.core.config import ChunkingConfig
from sirerag.core.errors import ConfigError, InputError
from sirerag.corpus.load import load_corpus
from sirerag.text.tokens import count_tokens
from sirerag.core.types import Chunk, Document

# shared data sits beside the repository: ../shared/bench relative to its root
BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench" / "musique" / "corpus.jsonl"

TEXT = (
    "Dr. Smith moved to St. Louis in 1901. He met J. R. R. Tolkien there, e.g. at a dinner! "
    "Was it 5 p.m.? \"Nobody knows.\" The U.S. Army arrived later.\nA new paragraph starts here. "
    "It has two sentences."
)


def _sentences(text: str) -> list[str]:
    return [text[a:b].strip() for a, b in sentence_spans(text)]


def test_sentence_splitter_respects_abbreviations_and_lines():
    assert _sentences(TEXT) == [
        "Dr. Smith moved to St. Louis in 1901.",
        "He met J. R. R. Tolkien there, e.g. at a dinner!",
        "Was it 5 p.m.?",
        "\"Nobody knows.\"",
        "The U.S. Army arrived later.",
        "A new paragraph starts here.",
        "It has two sentences.",
    ]


def _check_chunks(doc: Document, chunks: list[Chunk], max_tokens: int, *, words_whole: bool = True) -> None:
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.doc_id == doc.id and c.id == Chunk.make_id(doc.id, c.index, c.text)
        assert c.n_tokens == count_tokens(c.text) <= max_tokens
        assert c.text and c.text == c.text.strip() and c.text in doc.content
    # reading the chunks in order gives back the document's characters in order ...
    assert "".join("".join(c.text.split()) for c in chunks) == "".join(doc.content.split())
    if words_whole:  # ... and its words, none cut in two
        assert " ".join(c.text for c in chunks).split() == doc.content.split()


@pytest.mark.parametrize("max_tokens", [8, 20, 100])
def test_token_chunks_fit_and_keep_sentences_whole(max_tokens):
    doc = Document(id="d1", title="A title", text=TEXT * 3)
    chunks = chunk_documents([doc], ChunkingConfig(mode="tokens", max_tokens=max_tokens))
    _check_chunks(doc, chunks, max_tokens)
    sentences = _sentences(doc.content)
    for s in sentences:
        if count_tokens(s) <= max_tokens:  # a sentence that fits is never split across chunks
            assert any(s in c.text for c in chunks), s
    for c in chunks:  # and a chunk made of whole sentences starts at one
        if max_tokens == 100:
            assert any(c.text.startswith(s) for s in sentences), c.text


def test_packing_is_greedy():
    sentences = ["One two three four five six seven." for _ in range(10)]
    per = count_tokens(sentences[0])
    text = " ".join(sentences)
    pieces = split_text(text, max_tokens=3 * per + 2)
    assert [n for _, n in pieces][:3] == [count_tokens(" ".join(sentences[:3]))] * 3
    assert len(pieces) == 4  # 3 + 3 + 3 + 1 sentences


def test_overlong_sentences_are_split_on_clauses_then_words_then_tokens():
    clauses = ", ".join(f"clause number {i} goes here" for i in range(40)) + "."
    word = "Pneumonoultramicroscopicsilicovolcanoconiosis" * 20
    doc = Document(id="d2", text=f"Short start. {clauses} {word} tail words here. Short end.")
    chunks = chunk_documents([doc], ChunkingConfig(mode="tokens", max_tokens=12))
    _check_chunks(doc, chunks, 12, words_whole=False)
    texts = [c.text for c in chunks]
    assert texts[0].startswith("Short start. ")
    # clause chunks end at a comma (or the sentence's period), never inside a clause
    assert all(t.endswith(",") or t.endswith(".") for t in texts if "clause" in t)
    # only the overlong word is cut, into several token windows
    words = " ".join(texts).split()
    i = next(k for k, w in enumerate(words) if w.startswith("Pneumono"))
    j = words.index("tail")
    assert j - i >= 10 and "".join(words[i:j]) == word
    assert words[:i] + [word] + words[j:] == doc.text.split()


def test_non_ascii_and_cjk_text_stays_intact():
    text = "Ünïcödé façade – naïve café. " + "東京都は日本の首都である。" * 3 + "東京都は日本の首都である" * 30 + "。Fin."
    doc = Document(id="d3", text=text)
    chunks = chunk_documents([doc], ChunkingConfig(mode="tokens", max_tokens=10))
    _check_chunks(doc, chunks, 10, words_whole=False)
    assert "\ufffd" not in "".join(c.text for c in chunks)  # no character cut into bytes
    # "。" ends a sentence
    assert _sentences("東京都は日本の首都である。大阪は大きい。") == ["東京都は日本の首都である。", "大阪は大きい。"]


def test_passage_mode_gives_one_chunk_per_document():
    docs = [Document(id="a", title="T", text="First passage. " * 50), Document(id="b", text="Second."),
            Document(id="c", text="   ")]
    chunks = chunk_documents(docs, ChunkingConfig(mode="passage"))
    assert [(c.doc_id, c.index) for c in chunks] == [("a", 0), ("b", 0)]
    assert chunks[0].text == docs[0].content.strip() and chunks[0].n_tokens == count_tokens(chunks[0].text)
    assert chunks[0].n_tokens > 100  # passage mode never splits


def test_empty_documents_and_config_errors():
    docs = [Document(id="e", text=""), Document(id="f", text="Real text.")]
    assert [c.doc_id for c in chunk_documents(docs, ChunkingConfig())] == ["f"]
    with pytest.raises(InputError, match="no text to index: all 1 document"):
        chunk_documents([Document(id="e", text=" \n")], ChunkingConfig())
    assert chunk_documents([], ChunkingConfig()) == []
    with pytest.raises(ConfigError, match="chunking.max_tokens must be an integer >= 8, got 2"):
        chunk_documents(docs, ChunkingConfig(max_tokens=2))


def test_chunk_ids_are_stable():
    doc = Document(id="s", text=TEXT)
    first = chunk_documents([doc], ChunkingConfig(max_tokens=20))
    assert first == chunk_documents([doc], ChunkingConfig(max_tokens=20))
    assert len({c.id for c in first}) == len(first)


@pytest.mark.skipif(not BENCH.is_file(), reason="bench data not available")
def test_real_corpus_sample():
    docs = load_corpus(BENCH)[:300]
    chunks = chunk_documents(docs, ChunkingConfig(mode="tokens", max_tokens=100))
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    assert set(by_doc) == {d.id for d in docs}
    for d in docs:
        _check_chunks(d, by_doc[d.id], 100)

"""Splitting documents into chunks, the leaves of the trees.

``passage`` mode keeps each document whole (SiReRAG on the multi-hop benchmarks,
whose passages are already short). ``tokens`` mode follows RAPTOR: the text is
split into sentences and consecutive sentences are packed into chunks of at
most ``max_tokens`` tokens. A sentence longer than the limit is split on clause
punctuation (``, ; :``), then between words, and a single word longer than the
limit into token windows, so no chunk ever exceeds the limit. Every chunk is a
substring of ``Document.content`` with its outer white space stripped, so the
chunks of a document, read in order, give back its words in order.
"""
from __future__ import annotations

import logging
import re
from typing import Iterable, Sequence

from sirerag.core.config import ChunkingConfig
from sirerag.core.errors import InputError
from sirerag.text.tokens import count_tokens, count_tokens_many, get_encoding
from sirerag.core.types import ABBREVIATIONS, Chunk, Document

logger = logging.getLogger(__name__)

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before
# white space, at the full-width 。！？ used in CJK text, or at a line break.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)|[。！？]+[」』”’）]*|\n")
_CLAUSE_END = re.compile(r"[,;:]+(?=\s)")
_WORD_END = re.compile(r"\S(?=\s)")
_NEXT_CHAR = re.compile(r"\s*(\S)")

Span = tuple[int, int]


def chunk_documents(documents: Sequence[Document], config: ChunkingConfig) -> list[Chunk]:
    """Split documents into chunks, in document order.

    Args:
        documents: the corpus.
        config: ``mode`` (``tokens`` or ``passage``), ``max_tokens`` and ``encoding``.

    Returns:
        Chunks with content-hash ids; ``index`` counts chunks within their document
        and ``n_tokens`` is the exact token count of ``text``. Empty documents give none.

    Raises:
        ConfigError: ``config`` is invalid.
        InputError: no document has any text, so there is nothing to index.
    """
    config.validate()
    chunks: list[Chunk] = []
    if config.mode == "passage":
        contents = [doc.content.strip() for doc in documents]
        counts = count_tokens_many(contents, config.encoding)
        for doc, text, n in zip(documents, contents, counts):
            if text:
                chunks.append(Chunk(id=Chunk.make_id(doc.id, 0, text), doc_id=doc.id, index=0, text=text, n_tokens=n))
    else:
        for doc in documents:
            for index, (text, n) in enumerate(split_text(doc.content, config.max_tokens, config.encoding)):
                chunks.append(Chunk(id=Chunk.make_id(doc.id, index, text), doc_id=doc.id, index=index,
                                    text=text, n_tokens=n))
    if documents and not chunks:
        raise InputError(f"no text to index: all {len(documents)} document(s) are empty")
    logger.debug("chunked %d documents into %d chunks (mode=%s)", len(documents), len(chunks), config.mode)
    return chunks


def split_text(text: str, max_tokens: int, encoding: str = "cl100k_base") -> list[tuple[str, int]]:
    """Pack the sentences of ``text`` into pieces of at most ``max_tokens`` tokens.

    Returns:
        ``(piece, n_tokens)`` pairs in text order; pieces are stripped substrings of ``text``.
    """
    if max_tokens < 4:  # one character can take up to 4 byte-level tokens
        raise ValueError(f"max_tokens must be >= 4, got {max_tokens}")
    sentences = sentence_spans(text)
    pieces: list[tuple[Span, int]] = []
    for span, n in zip(sentences, _counts(text, sentences, encoding)):
        if n <= max_tokens:
            pieces.append((span, n))
        else:
            pieces.extend(_split_overlong(text, span, max_tokens, encoding))
    return _pack(text, pieces, max_tokens, encoding)


def sentence_spans(text: str) -> list[Span]:
    """``(start, end)`` of each sentence of ``text``; together they cover all non-blank text."""
    spans: list[Span] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        if match.group() != "\n" and _is_abbreviation(text, match.start(), end):
            continue
        spans.extend(_nonblank([(start, end)], text))
        start = end
    spans.extend(_nonblank([(start, len(text))], text))
    return spans


def _is_abbreviation(text: str, dot: int, end: int) -> bool:
    """True when the period at ``dot`` follows an abbreviation or an initial, or the next
    word starts in lower case (``e.g. this``), so the sentence goes on."""
    if text[dot] != "." or end - dot > 1:
        return False
    before = text[max(0, dot - 24):dot].split()
    word = before[-1].lstrip("(\"'“‘[").lower() if before else ""
    if word in ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
        return True
    following = _NEXT_CHAR.match(text, end)
    return following is not None and (following.group(1).islower() or following.group(1).isdigit())


def _nonblank(spans: Iterable[Span], text: str) -> list[Span]:
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _counts(text: str, spans: Sequence[Span], encoding: str) -> list[int]:
    # one encode per piece: tiktoken's encode_batch starts a thread pool per call,
    # which costs more than it saves on a handful of sentences
    enc = get_encoding(encoding)
    return [len(enc.encode(text[a:b].strip(), disallowed_special=())) for a, b in spans]


def _split_overlong(text: str, span: Span, max_tokens: int, encoding: str) -> list[tuple[Span, int]]:
    """Split one span over the limit: at clause punctuation, then between words, then
    into token windows; returns ``(span, n_tokens)`` pieces that each fit."""
    for pattern in (_CLAUSE_END, _WORD_END):
        parts = _cut(text, span, pattern)
        if len(parts) > 1:
            out: list[tuple[Span, int]] = []
            for part, n in zip(parts, _counts(text, parts, encoding)):
                out.extend([(part, n)] if n <= max_tokens else _split_overlong(text, part, max_tokens, encoding))
            return out
    windows = _token_windows(text, span, max_tokens, encoding)
    return list(zip(windows, _counts(text, windows, encoding)))


def _cut(text: str, span: Span, pattern: re.Pattern[str]) -> list[Span]:
    start, stop = span
    parts: list[Span] = []
    for match in pattern.finditer(text, start, stop):
        parts.append((start, match.end()))
        start = match.end()
    parts.append((start, stop))
    return _nonblank(parts, text)


def _token_windows(text: str, span: Span, max_tokens: int, encoding: str) -> list[Span]:
    """Cut a span without white space into windows of at most ``max_tokens`` tokens,
    at character positions where tokens start."""
    start, stop = span
    while text[start].isspace():
        start += 1
    enc = get_encoding(encoding)
    _, offsets = enc.decode_with_offsets(enc.encode(text[start:stop], disallowed_special=()))
    out: list[Span] = []
    cursor = 0
    while cursor < len(offsets):
        a = start + offsets[cursor]
        nxt = cursor + max_tokens
        b = start + offsets[nxt] if nxt < len(offsets) else stop
        # re-tokenising a window can merge differently; shrink until it fits
        while b - a > 1 and count_tokens(text[a:b], encoding) > max_tokens:
            b -= 1
        out.append((a, b))
        while cursor < len(offsets) and start + offsets[cursor] < b:
            cursor += 1
    return out


def _pack(text: str, counted: Sequence[tuple[Span, int]], max_tokens: int,
          encoding: str) -> list[tuple[str, int]]:
    """Greedily join consecutive pieces while the joined text stays within the limit.

    Joined counts are estimated as the sum of piece counts and then checked exactly;
    when BPE merges across a join push a chunk over, its last piece moves on.
    """
    pieces = [span for span, _ in counted]
    counts = [n for _, n in counted]
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(pieces):
        j, total = i + 1, counts[i]
        while j < len(pieces) and total + counts[j] <= max_tokens:
            total += counts[j]
            j += 1
        while True:
            chunk = text[pieces[i][0]:pieces[j - 1][1]].strip()
            n = counts[i] if j == i + 1 else count_tokens(chunk, encoding)
            if n <= max_tokens or j == i + 1:
                break
            j -= 1
        out.append((chunk, n))
        i = j
    return out

"""The lexical (BM25) index of a pool: tokenisation, build, save and load, with ``bm25s``.

The index is built once by ``sirerag build`` and stored in the index directory's
``bm25/`` folder with bm25s' own writer: the sparse score matrix as three ``.npy``
arrays (written and read with ``allow_pickle=False``), the vocabulary and the
BM25 parameters as JSON, plus ``tokenizer.json`` (the token pattern and the
stopword list, so a search tokenises queries exactly as the build tokenised the
pool without importing scikit-learn). Nothing here is pickled.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from sirerag.core.errors import IndexFormatError, check
from sirerag.core.io import atomic_dir, load_npy, read_json, write_json
from sirerag.core.io.files import read_index_json

logger = logging.getLogger(__name__)

#: Folder of the stored BM25 index inside an index directory.
BM25_DIR = "bm25"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_VERSION = 1
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_STORED_METHODS = ("lucene", "robertson", "atire")
_NONOCCURRENCE_FILE = "nonoccurrence_array.index.npy"
_CSC_FILES = {part: f"{part}.csc.index.npy" for part in ("data", "indices", "indptr")}  # bm25s' file names
_VOCAB_FILE, _PARAMS_FILE = "vocab.index.json", "params.index.json"
_BM25S_FILES = (*_CSC_FILES.values(), _VOCAB_FILE, _PARAMS_FILE)


def english_stopwords() -> frozenset[str]:
    """scikit-learn's English stopword list (imported only when an index is built)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def tokenize(text: str, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """Lower-cased alphanumeric tokens, stopwords removed."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in stopwords]


@dataclass(frozen=True, eq=False)
class LexicalIndex:
    """A built or loaded bm25s index over ``n_docs`` texts, with the tokeniser it used."""

    engine: Any
    stopwords: frozenset[str]
    n_docs: int

    @property
    def params(self) -> dict[str, Any]:
        """``k1``, ``b`` and ``method`` of the engine."""
        return {"k1": float(self.engine.k1), "b": float(self.engine.b), "method": str(self.engine.method)}

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every text for ``query`` (zeros when no query term is known)."""
        vocab = self.engine.vocab_dict
        tokens = [t for t in tokenize(query, self.stopwords) if t in vocab]
        if not tokens:
            return np.zeros(self.n_docs, dtype=np.float32)
        return np.asarray(self.engine.get_scores(tokens), dtype=np.float32)


def build_lexical_index(texts: Iterable[str], *, k1: float = 1.5, b: float = 0.75, method: str = "lucene",
                        stopwords: bool = True) -> LexicalIndex:
    """Index ``texts`` with BM25 (``method`` as in bm25s: ``lucene`` by default, ``robertson``
    = classic Okapi); English stopwords are removed unless ``stopwords=False``.

    Raises:
        ConfigError: ``method``, ``k1`` or ``b`` is invalid.
    """
    check(method in METHODS, "bm25 method", method, f"one of {METHODS}")
    check(k1 >= 0, "bm25 k1", k1, "a number >= 0")
    check(0 <= b <= 1, "bm25 b", b, "a number in [0, 1]")
    import bm25s

    from bm25s.tokenization import Tokenized

    words = english_stopwords() if stopwords else frozenset()
    # our own vocabulary in order of first appearance: bm25s builds one from a set, whose order (and so the
    # stored files) changes with the process's hash seed; the same texts must give the same index files.
    # Each text becomes its token ids as it is read: neither the texts nor their token strings are held
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(token, len(vocab)) for token in tokenize(t, words)] for t in texts]
    engine = bm25s.BM25(k1=k1, b=b, method=method)
    engine.index(Tokenized(ids=ids, vocab=vocab), show_progress=False)
    return LexicalIndex(engine=engine, stopwords=words, n_docs=len(ids))


def save_lexical_index(lexical: LexicalIndex, directory: str | Path) -> None:
    """Write ``lexical`` to ``directory`` (replaced atomically): bm25s' arrays and JSON, and
    ``tokenizer.json``."""
    with atomic_dir(directory) as tmp:
        lexical.engine.save(tmp, corpus=None, allow_pickle=False, show_progress=False)
        write_json(tmp / TOKENIZER_FILE, {"version": TOKENIZER_VERSION, "pattern": _TOKEN.pattern,
                                          "lowercase": True, "stopwords": sorted(lexical.stopwords),
                                          "n_docs": lexical.n_docs})


def load_lexical_index(directory: str | Path) -> LexicalIndex:
    """Load an index written by :func:`save_lexical_index` (arrays with ``allow_pickle=False``).

    Raises:
        IndexFormatError: a file is missing, or the tokeniser is not the one this version uses.
    """
    directory = Path(directory)
    missing = [n for n in (*_BM25S_FILES, TOKENIZER_FILE) if not (directory / n).is_file()]
    if missing:
        raise IndexFormatError(f"{directory}: BM25 index files missing: {', '.join(missing)}")
    tok = read_json(directory / TOKENIZER_FILE)
    if not isinstance(tok, dict) or tok.get("version") != TOKENIZER_VERSION or tok.get("pattern") != _TOKEN.pattern:
        raise IndexFormatError(f"{directory / TOKENIZER_FILE}: tokeniser version {tok.get('version')!r} "
                               f"is not {TOKENIZER_VERSION}; rebuild the index")
    params = read_json(directory / _PARAMS_FILE)
    if isinstance(params, dict) and params.get("method") in _STORED_METHODS \
            and not (directory / _NONOCCURRENCE_FILE).exists():
        engine: Any = StoredScores(directory, params)
    else:  # bm25l and bm25+ add a score for absent terms: bm25s' own reader knows how
        import bm25s

        engine = bm25s.BM25.load(directory, allow_pickle=False, mmap=False, load_corpus=False, show_progress=False)
    return LexicalIndex(engine=engine, stopwords=frozenset(tok["stopwords"]), n_docs=int(tok["n_docs"]))


class StoredScores:
    """A stored bm25s index, scored without importing bm25s.

    bm25s stores each term's precomputed BM25 scores over the documents as a CSC
    matrix, and a query's score is the sum of its terms' columns. Importing bm25s
    also imports numba (about 0.2 s, a fifth of a one-shot BM25 search), so a
    search sums the stored columns itself, adding in the same order as
    ``bm25s.BM25.get_scores`` does, which gives the same float32 scores (tested).
    Only for the methods without a score for absent terms (``lucene``,
    ``robertson``, ``atire``).
    """

    def __init__(self, directory: Path, params: dict[str, Any]) -> None:
        # memory-mapped: a query reads the columns of its terms, not the whole matrix
        self.data, self.indices, self.indptr = (load_npy(directory / name, mmap=True) for name in _CSC_FILES.values())
        vocab = read_index_json(directory / _VOCAB_FILE)  # orjson: the vocabulary grows with the corpus
        if not isinstance(vocab, dict):
            raise IndexFormatError(f"{directory / _VOCAB_FILE}: expected a JSON object of terms; rebuild the index")
        self.vocab_dict: dict[str, int] = vocab
        self.k1, self.b, self.method = params["k1"], params["b"], params["method"]
        self.num_docs, self.dtype = int(params["num_docs"]), np.dtype(params.get("dtype", "float32"))
        if self.indptr.ndim != 1 or not len(self.indptr) or len(self.data) != len(self.indices) \
                or int(self.indptr[-1]) != len(self.data):
            raise IndexFormatError(f"{directory}: the stored BM25 arrays do not match each other; rebuild the index")

    def get_scores(self, tokens: Sequence[str]) -> np.ndarray:
        """The BM25 score of every document for ``tokens`` (known terms; a repeated term counts again)."""
        scores = np.zeros(self.num_docs, dtype=self.dtype)
        for term in (self.vocab_dict[t] for t in tokens):
            if term >= len(self.indptr) - 1:  # bm25s' empty token has no column
                continue
            start, end = self.indptr[term], self.indptr[term + 1]
            np.add.at(scores, self.indices[start:end], self.data[start:end])
        return scores


def save_bm25(out: str | Path, texts: Iterable[str],
              **params: Any) -> dict[str, Any]:  # Any: build_lexical_index's keywords
    """Build the BM25 index of an index directory's pool texts and store it in ``out/bm25``.

    Returns:
        The manifest component record (path, type, parameters).
    """
    lexical = build_lexical_index(texts, **params)
    save_lexical_index(lexical, Path(out) / BM25_DIR)
    return {"type": "bm25s", "path": BM25_DIR, **lexical.params, "stopwords": bool(lexical.stopwords),
            "documents": lexical.n_docs}

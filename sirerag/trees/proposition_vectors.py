"""Every proposition embedded once, and the vectors derived from them.

A build embeds each proposition's text once (short texts, so cheap; ``propositions.npy``, one
float32 row per line of ``propositions.jsonl``). An aggregate's vector is then derived from its
propositions' rows instead of embedding its long text
(:class:`~sirerag.core.config.RelatednessConfig` ``aggregate_vectors``):

- ``mean``: the renormalised mean of its propositions' rows;
- ``token_mean``: the same mean weighted by each proposition's token count;
- ``text``: none derived; the aggregate's own text is embedded (the earlier behaviour);
- ``window``: the aggregate's own text where the embedder reads all of it; an aggregate longer than the
  embedder's input window (which the embedder would cut, so that only its first propositions count) gets
  the mean of the propositions inside that window, each weighted by its tokens inside it
  (:func:`window_vectors`). An embedder that does not tell its window embeds every text.

The graph's fact embeddings reuse the same rows (:func:`rows_by_text`).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping, Protocol, Sequence

import numpy as np

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import load_npy, save_npy
from sirerag.core.types import Node, Proposition, collapse_ws
from sirerag.embedding.base import Embedder, TokenWindow, l2_normalize, token_window
from sirerag.text.tokens import count_tokens_many

logger = logging.getLogger(__name__)

#: The proposition rows of an index, aligned with ``propositions.jsonl``.
PROPOSITION_VECTORS = "propositions.npy"


def encode_unique(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Encode ``texts`` as documents, each distinct text once and all of them in one call sorted
    by length (so batches pad little whatever blocks a cache cuts them into); rows in input order."""
    distinct = sorted(dict.fromkeys(texts), key=len)
    dim = int(getattr(embedder, "dim", 0))
    if not distinct:
        return np.zeros((0, dim), dtype=np.float32)
    rows = np.asarray(embedder.encode_documents(distinct), dtype=np.float32)
    where = {text: i for i, text in enumerate(distinct)}
    return rows[[where[t] for t in texts]]


class Statement(Protocol):
    """What is embedded as a proposition: a :class:`~sirerag.core.types.Proposition`, or a graph's fact."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...


def embed_propositions(embedder: Embedder, propositions: Sequence[Statement]) -> np.ndarray:
    """One row per proposition (its white-space-collapsed text), in input order."""
    return encode_unique(embedder, [collapse_ws(p.text) for p in propositions])


def derived_vectors(nodes: Sequence[Node], propositions: Sequence[Proposition], rows: np.ndarray, *,
                    mode: str) -> np.ndarray:
    """The vector of each node from its propositions' rows (``mode`` ``mean`` or ``token_mean``).

    Raises:
        ValueError: ``mode`` is neither, or a node names a proposition not in ``propositions``.
    """
    if mode not in ("mean", "token_mean"):
        raise ValueError(f"derived vectors are 'mean' or 'token_mean', not {mode!r}")
    position = {p.id: i for i, p in enumerate(propositions)}
    weights = np.ones(len(propositions), dtype=np.float64)
    if mode == "token_mean" and len(propositions):
        weights = np.asarray(count_tokens_many([collapse_ws(p.text) for p in propositions]), dtype=np.float64)
        weights = np.maximum(weights, 1.0)
    out = np.zeros((len(nodes), rows.shape[1] if rows.ndim == 2 else 0), dtype=np.float32)
    for n, node in enumerate(nodes):
        try:
            members = [position[pid] for pid in node.propositions]
        except KeyError as exc:
            raise ValueError(f"node {node.id} names proposition {exc.args[0]}, which has no vector") from None
        w = weights[members]
        out[n] = (w[:, None] * rows[members]).sum(axis=0) / w.sum()
    return l2_normalize(out)


def node_vectors(nodes: Sequence[Node], propositions: Sequence[Proposition], rows: np.ndarray | None,
                 embedder: Embedder, *, mode: str) -> np.ndarray:
    """The vectors of aggregate (or proposition) nodes by ``mode`` (``text``, ``window``, ``mean`` or
    ``token_mean``; the module docstring); ``rows`` are the proposition rows aligned with
    ``propositions`` (:func:`embed_propositions`), needed by every mode but ``text``."""
    if mode == "text" or not nodes:
        return _embed_texts(embedder, nodes)
    if rows is None:
        raise ValueError(f"aggregate vectors {mode!r} derive from the proposition rows, and none were given")
    if mode != "window":
        return derived_vectors(nodes, propositions, rows, mode=mode)
    window = token_window(embedder)
    if window is None:
        logger.info("aggregate vectors: the embedder %s does not tell its input window, so every aggregate's "
                    "text is embedded", getattr(embedder, "spec", "?"))
        return _embed_texts(embedder, nodes)
    return window_vectors(nodes, propositions, rows, embedder, window)


def window_vectors(nodes: Sequence[Node], propositions: Sequence[Proposition], rows: np.ndarray, embedder: Embedder,
                   window: TokenWindow) -> np.ndarray:
    """``window`` mode: nodes whose text fits ``window.max_input_tokens`` are embedded by ``embedder``; each
    other node gets the renormalised mean of the rows of the propositions the window would keep, in the
    node's order, weighted by the tokens of each inside the window (the last one only its first tokens).

    A node's text is its propositions' texts joined by single spaces, and a word-piece tokenizer splits
    at white space, so its token count is the sum of theirs plus the special tokens (checked in the tests).
    Only the texts of ``nodes``' propositions are counted (an update passes all of the index's).
    """
    position = {p.id: i for i, p in enumerate(propositions)}
    members = [_text_members(node, propositions, position) for node in nodes]
    texts = list(dict.fromkeys(text for found in members if found is not None for _, text in found))
    special = window.count_input_tokens([""])[0]
    limit = window.max_input_tokens - special
    counts = dict(zip(texts, (n - special for n in window.count_input_tokens(texts))))
    out = np.zeros((len(nodes), rows.shape[1]), dtype=np.float32)
    whole, derived = [], []
    for n, found in enumerate(members):
        if found is None or sum(counts[text] for _, text in found) <= limit:
            whole.append(n)  # fits the window (or is not its propositions' texts joined): its own text
            continue
        kept, taken, budget = [], [], limit
        for row, text in found:
            if budget <= 0:
                break
            kept.append(row)
            taken.append(float(max(1, min(counts[text], budget))))
            budget -= counts[text]
        out[n] = (np.asarray(taken)[:, None] * rows[kept]).sum(axis=0)
        derived.append(n)
    if whole:
        out[whole] = _embed_texts(embedder, [nodes[n] for n in whole])
    if derived:
        out[derived] = l2_normalize(out[derived])
    logger.info("aggregate vectors: %d embedded as text, %d longer than the embedder's %d-token window derived "
                "from the propositions inside it", len(whole), len(derived), window.max_input_tokens)
    return out


def _text_members(node: Node, propositions: Sequence[Proposition],
                  position: Mapping[str, int]) -> list[tuple[int, str]] | None:
    """The (row, text) of the propositions whose texts, joined by spaces, make ``node.text``, in its order
    (a text listed again under another proposition id, as merged identical aggregates list it, once); None
    when they do not make it."""
    found: dict[str, int] = {}
    for pid in node.propositions:
        if pid not in position:
            return None
        found.setdefault(collapse_ws(propositions[position[pid]].text), position[pid])
    return [(row, text) for text, row in found.items()] if " ".join(found) == node.text else None


def _embed_texts(embedder: Embedder, nodes: Sequence[Node]) -> np.ndarray:
    if not nodes:
        return np.zeros((0, int(getattr(embedder, "dim", 0))), dtype=np.float32)
    return np.asarray(embedder.encode_documents([n.text for n in nodes]), dtype=np.float32)


def rows_by_text(propositions: Sequence[Proposition], rows: np.ndarray) -> dict[str, np.ndarray]:
    """Text -> row, under both the stored and the white-space-collapsed text (what the graph's
    facts are embedded from)."""
    out: dict[str, np.ndarray] = {}
    for prop, row in zip(propositions, rows):
        out.setdefault(prop.text, row)
        out.setdefault(collapse_ws(prop.text), row)
    return out


def save_proposition_vectors(out: str | Path, rows: np.ndarray) -> None:
    """Write ``propositions.npy`` (float32, no pickle)."""
    save_npy(Path(out) / PROPOSITION_VECTORS, np.asarray(rows, dtype=np.float32))


def load_proposition_vectors(index: str | Path, count: int) -> np.ndarray | None:
    """The stored rows of an index with ``count`` propositions; None when it has none (built before them).

    Raises:
        IndexFormatError: the file's rows do not match the propositions.
    """
    path = Path(index) / PROPOSITION_VECTORS
    if not path.is_file():
        return None
    rows = load_npy(path)
    if rows.ndim != 2 or rows.shape[0] != count:
        raise IndexFormatError(f"{path}: {rows.shape[0] if rows.ndim else 0} rows for {count} propositions in "
                               "propositions.jsonl; rebuild the index")
    return np.asarray(rows, dtype=np.float32)


def vectors_for(propositions: Sequence[Statement], known: Mapping[str, np.ndarray], embedder: Embedder) -> np.ndarray:
    """Rows for ``propositions``: a row of ``known`` (by proposition id) where there is one, the rest
    embedded (an update embeds only its new propositions)."""
    missing = [p for p in propositions if p.id not in known]
    fresh = dict(zip((p.id for p in missing), embed_propositions(embedder, missing))) if missing else {}
    dim = int(getattr(embedder, "dim", 0))
    if not propositions:
        return np.zeros((0, dim), dtype=np.float32)
    return np.vstack([known[p.id] if p.id in known else fresh[p.id] for p in propositions]).astype(np.float32)

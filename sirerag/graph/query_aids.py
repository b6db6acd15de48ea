"""What a graph query needs that would otherwise be rebuilt at every start, stored beside the graph.

A one-shot PPR search used to spend nearly all of its time before the query: BM25 over the
leaf passages for the passage seeds (3.5 s for 6,796 2Wiki passages at load 3), the
surface-form table of every entity name (0.6 s for 47k names) and the rule tagger's word
counts over every chunk (0.5 s). The build computes them once and writes them under
``graph/`` in open formats (nothing pickled):

    graph/seeds_bm25/     bm25s arrays of the leaf texts PPR seeds from, in seed-row order
    graph/surface/        the surface forms of the entity names as arrays a search maps
                          (:mod:`sirerag.graph.surface_table`)
    graph/surface.json    the same forms as JSON, [[form, node], ...], which indexes built before the arrays have
    graph/tagger.json     the rule tagger's lower-case / capitalised word counts
    graph/fact_rows.npy   each fact's row in ``propositions.npy`` (so bridging need not read the propositions)

``graph.json`` records them under ``query_aids`` with what they were made from (the
seed rows' entry ids hashed, the minimum form length), so a loader uses one only when it
matches the index it serves, and otherwise rebuilds it in memory as before.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from sirerag.core.io import load_npy, read_jsonl, save_npy, write_json
from sirerag.core.io.checksums import sha256_file
from sirerag.core.io.contained import Folder, check_inside
from sirerag.core.io.files import read_index_json
from sirerag.core.types import Pool
from sirerag.graph.surface_table import FormTable, save_form_table

if TYPE_CHECKING:
    from sirerag.pool.bm25 import LexicalIndex

logger = logging.getLogger(__name__)

SEEDS_BM25 = "seeds_bm25"
SURFACE = "surface.json"
SURFACE_TABLE = "surface"
TAGGER = "tagger.json"
FACT_ROWS = "fact_rows.npy"
POOL_NODES = "pool_nodes"
ENTRY_NODES, SEED_NODES = "entry_nodes.npy", "seed_nodes.npy"


def seed_rows(pool: Pool, passage_index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the pool's leaf entries whose first passage is a graph passage node, and those nodes.

    PPR seeds passages from these rows' dense and BM25 scores; the build stores BM25 over their texts."""
    leaves = pool.leaf_passages()  # read without parsing the entries of a pool read lazily
    pairs = [(i, passage_index[leaves[i][0]]) for i in sorted(leaves) if leaves[i] and leaves[i][0] in passage_index]
    return (np.array([i for i, _ in pairs], dtype=np.int64), np.array([n for _, n in pairs], dtype=np.int64))


def rows_key(pool: Pool, rows: np.ndarray) -> str:
    """sha256 of the entry ids at ``rows``, in order: what a stored seed index was made for."""
    ids = pool.ids  # not the entries: a loaded pool parses an entry when it is first used
    return hashlib.sha256(b"".join(ids[i].encode("utf-8") + b"\n" for i in rows.tolist())).hexdigest()


def save_query_aids(directory: str | Path, *, pool: Pool | None, passage_index: dict[str, int],
                    surface_forms: Sequence[tuple[str, int]] | None, min_chars: int,
                    tagger_counts: dict[str, dict[str, int]] | None, fact_ids: Sequence[str] = (),
                    propositions: Path | None = None, entries: Path | None = None) -> dict[str, Any]:
    """Write the aids that are given into ``directory``; returns their record for ``graph.json``.

    With ``pool`` and ``entries`` (the index's ``entries.jsonl``, already written) the pool's entries as graph
    nodes are stored too (:func:`~sirerag.graph.entries.entry_node_pairs`, :func:`seed_rows`), with the file's
    sha256; a loader uses them only for a pool read from a file with that sha256.

    ``fact_ids`` (the graph's facts, which are propositions) with ``propositions`` (the index's
    ``propositions.jsonl``, already written) store each fact's line in that file, which is its row of
    ``propositions.npy``, with the file's sha256; a loader uses them only for a file with that sha256."""
    from sirerag.pool.bm25 import build_lexical_index, save_lexical_index

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {}
    if pool is not None:
        rows, nodes = seed_rows(pool, passage_index)
        wanted = set(rows.tolist())  # rows ascend: their texts in one pass over the pool, none kept
        lexical = build_lexical_index(e.text for i, e in enumerate(pool.scan()) if i in wanted)
        save_lexical_index(lexical, directory / SEEDS_BM25)
        record["seeds_bm25"] = {"path": SEEDS_BM25, "documents": int(rows.size), "rows": rows_key(pool, rows),
                                **lexical.params}
        if entries is not None and entries.is_file():
            entries_sha256 = sha256_file(entries)
            record["seeds_bm25"].update(entries=len(pool), entries_sha256=entries_sha256)
            from sirerag.graph.entries import entry_node_pairs

            save_npy(directory / ENTRY_NODES, entry_node_pairs(pool, passage_index))
            save_npy(directory / SEED_NODES, np.stack((rows, nodes)))
            record[POOL_NODES] = {"entry_nodes": ENTRY_NODES, "seed_nodes": SEED_NODES, "entries": len(pool),
                                  "entries_sha256": entries_sha256}
    if surface_forms is not None:
        write_json(directory / SURFACE, [[form, int(node)] for form, node in surface_forms])
        table = save_form_table(directory / SURFACE_TABLE, surface_forms)
        record["surface"] = {"path": SURFACE, "table": SURFACE_TABLE, "min_chars": int(min_chars), **table}
    if tagger_counts is not None:
        write_json(directory / TAGGER, tagger_counts)
        record["tagger"] = {"path": TAGGER, "kind": "rules"}
    if fact_ids and propositions is not None and propositions.is_file():
        fact_rows = _fact_rows(fact_ids, propositions)
        if fact_rows is not None:
            save_npy(directory / FACT_ROWS, fact_rows)
            record["fact_rows"] = {"path": FACT_ROWS, "facts": int(fact_rows.size),
                                   "propositions_sha256": sha256_file(propositions)}
    return record


def _fact_rows(fact_ids: Sequence[str], propositions: Path) -> np.ndarray | None:
    """The line of each fact's proposition in ``propositions`` (0-based), or None when one is missing."""
    line: dict[Any, int] = {}
    for i, record in enumerate(read_jsonl(propositions)):
        line.setdefault(record.get("id") if isinstance(record, dict) else None, i)
    missing = [fid for fid in fact_ids if fid not in line]
    if missing:
        logger.info("%s has no proposition %s of the graph's facts: no fact rows stored", propositions, missing[0])
        return None
    return np.array([line[fid] for fid in fact_ids], dtype=np.int64)


#: The fields of a ``query_aids`` record that name a file or folder (relative to ``graph/``).
_PATH_FIELDS = ("path", "table", "entry_nodes", "seed_nodes")


def check_aid_paths(directory: Path, record: object, source: Path) -> None:
    """The files ``graph.json``'s ``query_aids`` names must lie inside the graph folder ``directory``:
    IndexFormatError naming ``source`` and the field of the first that leaves it."""
    folder = Folder(directory)
    for name, info in (record.items() if isinstance(record, dict) else ()):
        for key in _PATH_FIELDS:
            if isinstance(info, dict) and key in info:
                check_inside(folder, info[key], f"{source}: query_aids.{name}.{key}", what="the graph folder")


def load_seeds_bm25(directory: Path, record: dict[str, Any], pool: Pool, rows: np.ndarray, *,
                    entries_sha256: str | None = None) -> LexicalIndex | None:
    """The stored seed BM25 index when it was made for exactly these rows of this pool, else None: made for a
    pool of as many entries read from an ``entries.jsonl`` whose sha256 is ``entries_sha256`` (the manifest's
    record: nothing of the pool is read), or else for the pool's entry ids at ``rows`` (hashed)."""
    info = record.get("seeds_bm25")
    if not info or info.get("documents") != int(rows.size):
        return None
    same_file = entries_sha256 is not None and info.get("entries_sha256") == entries_sha256 \
        and info.get("entries") == len(pool)
    if not same_file and info.get("rows") != rows_key(pool, rows):
        return None
    from sirerag.pool.bm25 import load_lexical_index

    return load_lexical_index(directory / info["path"])


def load_surface_forms(directory: Path, record: dict[str, Any], min_chars: int,
                       n_nodes: int) -> FormTable | dict[str, int] | None:
    """The stored surface forms when they were made with ``min_chars``, else None: the memory-mapped table
    (:class:`~sirerag.graph.surface_table.FormTable`, checked against a graph of ``n_nodes`` nodes), or for a graph
    stored before it, form -> node from ``surface.json``."""
    info = record.get("surface")
    if not info or info.get("min_chars") != min_chars:
        return None
    if "table" in info:
        return FormTable.open(directory / info["table"], forms=int(info.get("forms", -1)),
                              longest=int(info.get("longest", 0)), n_nodes=n_nodes)
    return dict(read_index_json(directory / info["path"]))


def load_fact_rows(directory: Path, record: dict[str, Any], *, facts: int, propositions_sha256: str | None,
                   vectors: int) -> np.ndarray | None:
    """Each fact's row in ``propositions.npy`` when they were stored for exactly this ``propositions.jsonl``
    (its sha256, as the manifest records it) and every row is one of its ``vectors`` rows, else None."""
    info = record.get("fact_rows")
    if not info or info.get("facts") != facts or not propositions_sha256 \
            or info.get("propositions_sha256") != propositions_sha256:
        return None
    rows = np.asarray(load_npy(directory / info["path"]))
    if rows.shape != (facts,) or (rows.size and (int(rows.min()) < 0 or int(rows.max()) >= vectors)):
        return None
    return rows


def load_pool_nodes(directory: Path, record: dict[str, Any], *, entries: int, entries_sha256: str | None,
                    nodes: int) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None:
    """``(entry-node pairs, (seed rows, their passage nodes))`` when they were stored for exactly this
    ``entries.jsonl`` (its sha256, as the manifest records it) and fit a pool of ``entries`` rows and a graph of
    ``nodes`` nodes, else None."""
    info = record.get(POOL_NODES)
    if not info or info.get("entries") != entries or not entries_sha256 \
            or info.get("entries_sha256") != entries_sha256:
        return None
    pairs, seeds = (np.asarray(load_npy(directory / info[key])) for key in ("entry_nodes", "seed_nodes"))
    for array in (pairs, seeds):
        if array.ndim != 2 or array.shape[0] != 2 or (array.size and (
                int(array[0].min()) < 0 or int(array[0].max()) >= entries
                or int(array[1].min()) < 0 or int(array[1].max()) >= nodes)):
            return None
    return pairs, (seeds[0], seeds[1])


def load_tagger_counts(directory: Path, record: dict[str, Any]) -> dict[str, dict[str, int]] | None:
    """The stored rule-tagger counts, else None."""
    info = record.get("tagger")
    return read_index_json(directory / info["path"]) if info else None

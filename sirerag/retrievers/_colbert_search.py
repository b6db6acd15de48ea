"""Searching a built ColBERT index through the colbert-ai worker (see :mod:`sirerag.retrievers.colbert`)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from sirerag.core.errors import check
from sirerag.core.io import read_json
from sirerag.retrievers._colbert_client import WorkerClient
from sirerag.retrievers.base import Hit, SearchOne, check_query

SEARCH_TIMEOUT = 600.0
COLLECTION = "collection.tsv"
ENTRY_IDS = "entry_ids.json"
PLAID = "plaid"


class ColBERTRetriever(SearchOne):
    """Searches a built ColBERT index; hits carry pool entry ids and ColBERT (MaxSim) scores.

    The colbert-ai worker starts on the first search and stays up until :meth:`close`
    (or the end of a ``with`` block).

    Args:
        folder: the index's ``colbert/<slug>`` folder.
        checkpoint: the local checkpoint folder it was built with.
        query_maxlen: query length in tokens (None: the checkpoint's, 32 for ColBERTv2).
        timeout: seconds each request may take, worker start-up included.
    """

    name = "colbert"

    def __init__(self, folder: str | Path, checkpoint: str | Path, *, query_maxlen: int | None = None,
                 timeout: float = SEARCH_TIMEOUT) -> None:
        check(query_maxlen is None or (isinstance(query_maxlen, int) and 4 <= query_maxlen <= 512),
              "query_maxlen", query_maxlen, "None or an integer in [4, 512]")
        check(timeout > 0, "timeout", timeout, "a positive number of seconds")
        self.folder = Path(folder).resolve()  # the worker runs in another directory
        self.checkpoint = Path(checkpoint).resolve()
        self.query_maxlen = query_maxlen
        self.timeout = float(timeout)
        self.entry_ids: list[str] = list(read_json(self.folder / ENTRY_IDS))
        self._worker: WorkerClient | None = None

    def _open(self) -> WorkerClient:
        if self._worker is None or not self._worker.alive:
            worker = WorkerClient(cwd=self.folder)
            try:
                worker.call("open", {"checkpoint": str(self.checkpoint), "collection": str(self.folder / COLLECTION),
                                     "root": str(self.folder), "name": PLAID, "query_maxlen": self.query_maxlen},
                            timeout=self.timeout)
            except BaseException:
                worker.kill()  # an index it could not open: do not leave it running
                raise
            self._worker = worker
        return self._worker

    def search_many(self, queries: Sequence[str], k: int = 10, *, batch_size: int = 128) -> list[list[Hit]]:
        """Top ``k`` entries per query, best first (fewer when PLAID finds fewer candidates)."""
        check(isinstance(k, int) and k >= 1, "k", k, "a positive integer")
        check_query(queries, batch=True)
        queries = list(queries)
        if not queries:
            return []
        worker = self._open()
        results: list[list[Hit]] = []
        for start in range(0, len(queries), batch_size):
            batch = worker.call("search", {"queries": queries[start : start + batch_size], "k": k},
                                timeout=self.timeout)
            results.extend([Hit(self.entry_ids[int(pid)], float(score)) for pid, score in ranked]
                           for ranked in batch)
        return results

    def close(self) -> None:
        """Stop the worker process (searching again starts a new one)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def __enter__(self) -> ColBERTRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

"""The on-disk LLM call cache (SQLite).

Every completion is stored under a key that hashes what determines the output:
backend spec, model, prompt version, messages, ``max_tokens``, temperature and
JSON mode. A second build with the same inputs makes no model call, and a build
killed midway resumes paying only for what is missing, because each result is
written as soon as it arrives. Failures are never stored. Keys and rows hold no
secret: specs never contain API keys.

Layout of ``calls.sqlite`` (WAL mode, safe for concurrent threads and processes):
``calls`` (one row per cached completion, with its request as JSON and its token
usage) and ``runs`` (hits, misses, failures and tokens of every run that used the
cache, updated as it goes).
"""
from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from sirerag.core.io.sqlite import cache_errors
from sirerag.llm.accounting import UsageLedger
from sirerag.llm.base import LLM, Batching, Completion, LLMCallError, LLMRequest, TransientLLMError

logger = logging.getLogger(__name__)

DB_NAME = "calls.sqlite"
SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY, spec TEXT NOT NULL, prompt_version TEXT NOT NULL, request TEXT NOT NULL,
    text TEXT NOT NULL, finish_reason TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL, spec TEXT NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0, misses INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0);
"""


def cache_key(spec: str, model: str, request: LLMRequest) -> str:
    """sha256 over everything that determines a completion (never a key or URL secret)."""
    payload = {
        "spec": spec,
        "model": model,
        "prompt_version": request.prompt_version,
        "messages": [list(m) for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": float(request.temperature),
        "json_mode": bool(request.json_mode),
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def resolve_db(path: str | Path) -> Path:
    """The database file for ``path``: the ``.sqlite`` file itself, a cache folder holding
    one, or an index directory / build cache folder (``DIR/cache/llm`` or ``DIR/llm``).
    A folder without a database resolves to ``path/calls.sqlite`` (created on first use)."""
    path = Path(path)
    if path.suffix == ".sqlite":
        return path
    for candidate in (path, path / "cache" / "llm", path / "llm"):
        if (candidate / DB_NAME).is_file():
            return candidate / DB_NAME
    return path / DB_NAME


class CallCache:
    """A SQLite store of completions; one connection shared by threads under a lock.

    Args:
        path: cache folder (created if missing) or a ``.sqlite`` file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = resolve_db(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False,
                                     isolation_level=None)
        with cache_errors(self.path), self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))

    def get(self, key: str) -> Completion | None:
        with cache_errors(self.path), self._lock:
            row = self._conn.execute(
                "SELECT text, finish_reason, prompt_tokens, completion_tokens FROM calls WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        return Completion(text=row[0], finish_reason=row[1], prompt_tokens=row[2], completion_tokens=row[3],
                          cached=True)

    def put(self, key: str, spec: str, request: LLMRequest, completion: Completion) -> None:
        record = json.dumps({"messages": [list(m) for m in request.messages], "max_tokens": request.max_tokens,
                             "temperature": request.temperature, "json_mode": request.json_mode},
                            ensure_ascii=False)
        with cache_errors(self.path), self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, spec, request.prompt_version, record, completion.text, completion.finish_reason,
                 completion.prompt_tokens, completion.completion_tokens, time.time()),
            )

    def start_run(self, spec: str) -> int:
        with cache_errors(self.path), self._lock:
            cur = self._conn.execute("INSERT INTO runs (started, spec) VALUES (?, ?)", (time.time(), spec))
            if cur.lastrowid is None:  # an INSERT sets it
                raise RuntimeError(f"{self.path}: the new run got no row id")
            return int(cur.lastrowid)

    def count(self, run_id: int, *, hits: int = 0, misses: int = 0, failures: int = 0,
              prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        with cache_errors(self.path), self._lock:
            self._conn.execute(
                "UPDATE runs SET hits = hits + ?, misses = misses + ?, failures = failures + ?, "
                "prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ? WHERE id = ?",
                (hits, misses, failures, prompt_tokens, completion_tokens, run_id),
            )

    def entries(self, prompt_version: str | None = None) -> Iterator[dict[str, Any]]:
        """Cached calls as dicts (``spec``, ``prompt_version``, ``request``, ``text``, tokens),
        e.g. to reuse teacher completions as fine-tuning data."""
        sql = "SELECT spec, prompt_version, request, text, prompt_tokens, completion_tokens FROM calls"
        args: tuple = ()
        if prompt_version is not None:
            sql, args = sql + " WHERE prompt_version = ?", (prompt_version,)
        with cache_errors(self.path), self._lock:
            rows = self._conn.execute(sql + " ORDER BY created", args).fetchall()
        for spec, version, request, text, p, c in rows:
            yield {"spec": spec, "prompt_version": version, "request": json.loads(request), "text": text,
                   "prompt_tokens": p, "completion_tokens": c}

    def stats(self) -> dict[str, Any]:
        """Entries and stored tokens by spec and prompt version; hits/misses summed over runs
        and for the latest run."""
        with cache_errors(self.path), self._lock:
            by = self._conn.execute(
                "SELECT spec, prompt_version, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens) "
                "FROM calls GROUP BY spec, prompt_version ORDER BY spec, prompt_version").fetchall()
            runs = self._conn.execute(
                "SELECT COUNT(*), SUM(hits), SUM(misses), SUM(failures), SUM(prompt_tokens), "
                "SUM(completion_tokens) FROM runs").fetchone()
            last = self._conn.execute(
                "SELECT id, started, spec, hits, misses, failures, prompt_tokens, completion_tokens "
                "FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        entries = [{"spec": s, "prompt_version": v, "entries": n, "prompt_tokens": p or 0,
                    "completion_tokens": c or 0} for s, v, n, p, c in by]
        names = ("runs", "hits", "misses", "failures", "prompt_tokens", "completion_tokens")
        out: dict[str, Any] = {
            "path": str(self.path),
            "entries": sum(e["entries"] for e in entries),
            "stored_prompt_tokens": sum(e["prompt_tokens"] for e in entries),
            "stored_completion_tokens": sum(e["completion_tokens"] for e in entries),
            "by_prompt": entries,
            "all_runs": {k: int(v or 0) for k, v in zip(names, runs)},
        }
        if last is not None:
            out["last_run"] = dict(zip(("id", "started", "spec", "hits", "misses", "failures", "prompt_tokens",
                                        "completion_tokens"), last))
        return out

    def close(self) -> None:
        with cache_errors(self.path), self._lock:
            self._conn.close()


class CachedLLM(Batching):
    """Wraps a backend so every call goes through a :class:`CallCache`.

    Identical requests in one batch are sent once. Results are stored as they
    arrive when the backend streams them (``iter_complete``); otherwise in slices,
    so an interrupted run keeps what was already answered.
    """

    def __init__(self, inner: LLM, cache: CallCache, *, slice_size: int = 16) -> None:
        self.inner = inner
        self.cache = cache
        self.slice_size = slice_size
        self.usage = UsageLedger()
        self._run_id: int | None = None
        self._run_lock = threading.Lock()

    @property
    def spec(self) -> str:
        return self.inner.spec

    @property
    def model(self) -> str:
        return str(getattr(self.inner, "model", ""))

    @property
    def preferred_slice(self) -> int:
        """Requests per ``complete_many`` call that keep the backend busy (0: no preference)."""
        return int(getattr(self.inner, "preferred_slice", 0))

    def key(self, request: LLMRequest) -> str:
        return cache_key(self.spec, self.model, request)

    def complete_all(self, requests: Sequence[LLMRequest]) -> list[Completion | LLMCallError]:
        """Complete every request in order, from the cache where possible; see :class:`LLM`."""
        results: list[Completion | LLMCallError | None] = [None] * len(requests)
        keys = [self.key(r) for r in requests]
        pending: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            if key in pending:
                pending[key].append(i)
                continue
            hit = self.cache.get(key)
            if hit is None:
                pending[key] = [i]
            else:
                results[i] = hit
        hits = sum(r is not None for r in results)
        if hits:
            self._count(hits=hits)
        todo = [positions[0] for positions in pending.values()]
        later: Completion | LLMCallError
        for j, result in self._stream([requests[i] for i in todo]):
            first = todo[j]
            request = requests[first]
            if isinstance(result, Completion) and not isinstance(result.text, str):  # never cached, whatever the backend
                result = TransientLLMError(f"{self.spec}: malformed reply (the completion is a "
                                           f"{type(result.text).__name__}, not a string)")
            if isinstance(result, Completion):
                self.cache.put(keys[first], self.spec, request, result)
                self._count(misses=1, prompt_tokens=result.prompt_tokens,
                            completion_tokens=result.completion_tokens)
                later = Completion(text=result.text, prompt_tokens=result.prompt_tokens,
                                   completion_tokens=result.completion_tokens, cached=True,
                                   finish_reason=result.finish_reason)
            else:
                self._count(failures=1)
                self.usage.record_failure(request)
                later = result
            for n, i in enumerate(pending[keys[first]]):
                results[i] = result if n == 0 else later
            if isinstance(result, Completion) and len(pending[keys[first]]) > 1:
                self._count(hits=len(pending[keys[first]]) - 1)  # duplicates in the batch cost nothing
        for request, found in zip(requests, results):
            if isinstance(found, Completion):
                self.usage.record(request, found)
        return results  # type: ignore[return-value]  # every position is filled: each key was sent or a hit

    def _stream(self, requests: list[LLMRequest]) -> Iterator[tuple[int, Completion | LLMCallError]]:
        if not requests:
            return
        if hasattr(self.inner, "iter_complete"):
            yield from self.inner.iter_complete(requests)
            return
        for start in range(0, len(requests), self.slice_size):
            part = requests[start:start + self.slice_size]
            for j, result in enumerate(self.inner.complete_many(part, return_exceptions=True)):
                yield start + j, result

    def _count(self, **counts: int) -> None:
        with self._run_lock:
            if self._run_id is None:
                self._run_id = self.cache.start_run(self.spec)
        self.cache.count(self._run_id, **counts)

"""The indexes a server holds, by name, each one commit at a time; the bounds of a request; the bind rule.

A :class:`ServedIndex` hands every request one loaded :class:`sirerag.Index` (one commit) for the whole
request (:meth:`ServedIndex.run`). Before a request it compares the folder's ``manifest.json`` with the one it
loaded (a ``stat``): a ``sirerag build``/``add``/``remove`` that swapped the folder since is loaded, and later
requests read the new commit while requests under way finish on the old one (closed when the last of them
ends). A request whose lazy read (``bm25/``, ``graph/``, documents) meets a swap gets
:class:`~sirerag.core.errors.IndexChangedError` from the library; it is run once more on the new commit.

Searches of one index run in parallel: the dense, BM25 and PPR retrievers only read shared arrays during a
search. Loading a retriever (once per name and options) is serialised per index, and a search with any other
retriever (ColBERT talks to one worker process) runs one at a time per index.
"""
from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import re
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, TypeVar

from sirerag.core.config.serve import MIN_API_KEY_CHARS, ServeConfig
from sirerag.core.errors import ConfigError, IndexChangedError, InputError, check
from sirerag.retrievers.base import check_query

if TYPE_CHECKING:
    from sirerag.api import Index
    from sirerag.llm.base import LLM
    from sirerag.retrievers.base import Retriever

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: a served index's name: what URLs and clients use
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: retrievers whose search only reads shared state, so one loaded copy serves parallel requests
THREAD_SAFE = frozenset({"dense", "bm25", "ppr", "keyword-graph"})
#: the retriever options a client may send (the CLI's, less those naming a model or a server to load)
CLIENT_OPTIONS = frozenset({"linking", "passage_weight", "fusion", "pool_rule", "leaf_share", "lift_ratio", "mode",
                            "seeds", "keywords"})


class UnknownIndexError(InputError):
    """A request names an index the server does not serve (HTTP 404)."""


def parse_indexes(specs: Sequence[str]) -> dict[str, Path]:
    """``{name: folder}`` of ``INDEX`` arguments: ``PATH`` (named by its folder) or ``NAME=PATH``.

    Raises:
        ConfigError: no index, a name that is not ``[A-Za-z0-9._-]`` (64 at most) or a name given twice.
    """
    out: dict[str, Path] = {}
    if not specs:
        raise ConfigError("give at least one INDEX (a folder, or NAME=FOLDER)")
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not NAME.fullmatch(name):
            name, path = Path(spec.rstrip("/")).name, spec
        if not NAME.fullmatch(name):
            raise ConfigError(f"index {spec!r}: the name {name!r} must be letters, digits, '.', '_' or '-' (64 at "
                              "most); name it with NAME=FOLDER")
        if name in out:
            raise ConfigError(f"index {spec!r}: the name {name!r} is given twice; name them with NAME=FOLDER")
        out[name] = Path(path)
    return out


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and the loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None, *, env: str) -> None:
    """Refuse to listen beyond loopback without an API key, and any key too short to protect anything."""
    if api_key is not None and len(api_key) < MIN_API_KEY_CHARS:
        raise ConfigError(f"{env} must be at least {MIN_API_KEY_CHARS} characters, got {len(api_key)}")
    if api_key is None and not is_loopback(host):
        raise ConfigError(f"--host {host} is not a loopback address: set {env} to an API key (at least "
                          f"{MIN_API_KEY_CHARS} characters) that clients send as 'Authorization: Bearer KEY'")


def key_matches(given: str | None, api_key: str) -> bool:
    """``given`` equals ``api_key``, compared in constant time."""
    return given is not None and hmac.compare_digest(given.encode("utf-8"), api_key.encode("utf-8"))


def check_queries(queries: Sequence[str], k: int, config: ServeConfig) -> None:
    """The bounds of one search request: 1..``max_batch`` non-empty queries of ``max_query_chars`` at most
    (the library's rule, :func:`~sirerag.retrievers.base.check_query`), ``k`` from 1 to ``max_k``."""
    check(1 <= k <= config.max_k, "k", k, f"an integer from 1 to {config.max_k} (serve.max_k)")
    if not 1 <= len(queries) <= config.max_batch:
        raise InputError(f"a batch of {len(queries)} queries; give 1 to {config.max_batch} (serve.max_batch)")
    check_query(queries[0] if len(queries) == 1 else list(queries), max_chars=config.max_query_chars,
                limit="serve.max_query_chars")  # the CLI's messages, one query named as the CLI names it


def check_options(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - CLIENT_OPTIONS)
    if unknown:
        raise ConfigError(f"options {unknown} are not taken over the network; allowed: {sorted(CLIENT_OPTIONS)}")


def load_reader(spec: str | None) -> LLM | None:
    """The reader of ``ask`` loaded from its spec (no call cache), or None without one."""
    if spec is None:
        return None
    from sirerag.core.config import LLMConfig
    from sirerag.llm.factory import load_llm

    return load_llm(spec, config=LLMConfig())


def _stamp(path: Path) -> tuple[int, ...] | None:
    """What changes when the folder's manifest is replaced (a swap or a rewrite), read with one ``stat``."""
    try:
        st = os.stat(path / "manifest.json")
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


class ServedIndex:
    """One index served by name: one loaded commit per request, the folder's newest between requests."""

    def __init__(self, name: str, path: str | Path, *, max_retrievers: int = 16) -> None:
        from sirerag.api import Index

        self.name, self.path, self.max_retrievers = name, Path(path), max_retrievers
        self._lock = threading.Lock()  # the current index, its leases and retirements
        self._reload_lock = threading.Lock()  # one load at a time
        self._load_lock = threading.Lock()  # retrievers are loaded (and kept) one at a time
        self._serial = threading.Lock()  # searches with a retriever that is not THREAD_SAFE
        self._stamp = _stamp(self.path)
        self._index: Index = Index.load(self.path)
        self._leases: dict[int, int] = {}
        self._retired: dict[int, Index] = {}
        self._configs: set[tuple[str | None, str]] = set()

    @property
    def index(self) -> Index:
        """The commit the next request reads (without looking at the folder)."""
        return self._index

    def run(self, work: Callable[[Index], T]) -> tuple[Index, T]:
        """``work(index)`` on the folder's current commit; on IndexChangedError once more on the new one."""
        for attempt in range(2):
            with self._lease() as index:
                try:
                    return index, work(index)
                except IndexChangedError:
                    if attempt:
                        raise
                    logger.info("%s: the index changed under a request; loading it again", self.name)
            self._reload(stale=index)
        raise AssertionError("unreachable")  # pragma: no cover

    def retriever(self, index: Index, name: str | None, options: Mapping[str, Any]) -> Retriever:
        """The retriever ``name`` with ``options`` of ``index``, loaded once (a bounded number of them)."""
        key = (name, repr(sorted(options.items())))
        with self._load_lock:
            if key not in self._configs and len(self._configs) >= self.max_retrievers:
                raise ConfigError(f"index {self.name!r} already keeps {self.max_retrievers} retriever settings "
                                  "(serve.max_retrievers); use one of those already asked for")
            retriever = index.retriever(name, **options)
            self._configs.add(key)
            return retriever

    @contextmanager
    def serialised(self, name: str | None) -> Iterator[None]:
        """Hold the index's search lock unless every part of the retriever ``name`` is thread-safe."""
        parts = set((name or "").split("+")) - {""}
        if parts <= THREAD_SAFE:
            yield
        else:
            with self._serial:
                yield

    @contextmanager
    def _lease(self) -> Iterator[Index]:
        if _stamp(self.path) != self._stamp:
            self._reload()
        with self._lock:
            index = self._index
            self._leases[id(index)] = self._leases.get(id(index), 0) + 1
        try:
            yield index
        finally:
            with self._lock:
                self._leases[id(index)] -= 1
                done = self._leases[id(index)] == 0 and id(index) in self._retired
                if self._leases[id(index)] == 0:
                    del self._leases[id(index)]
                    self._retired.pop(id(index), None)
            if done:
                index.close()

    def _reload(self, stale: Index | None = None) -> None:
        """Load the folder's commit unless another request just did (or the folder holds the loaded one)."""
        from sirerag.api import Index

        with self._reload_lock:
            stamp = _stamp(self.path)  # read before the load: a swap during it is seen by the next request
            if (stamp == self._stamp and stale is None) or (stale is not None and self._index is not stale):
                return
            fresh = Index.load(self.path)
            with self._lock:
                old, self._index, self._stamp = self._index, fresh, stamp
                self._configs = set()
                busy = self._leases.get(id(old), 0) > 0
                if busy:
                    self._retired[id(old)] = old
            if fresh.loaded.commit != old.loaded.commit:
                logger.info("%s: serving commit %s (was %s)", self.name, fresh.loaded.commit[:12],
                            old.loaded.commit[:12])
            if not busy:
                old.close()

    def close(self) -> None:
        with self._lock:
            indexes = [self._index, *self._retired.values()]
            self._retired = {}
        for index in indexes:
            index.close()


class IndexSet:
    """The indexes of one server by name."""

    def __init__(self, indexes: Mapping[str, str | Path], *, max_retrievers: int = 16) -> None:
        self.served = {name: ServedIndex(name, path, max_retrievers=max_retrievers)
                       for name, path in indexes.items()}

    def get(self, name: str | None) -> ServedIndex:
        """The index ``name``; None names the only one when there is one.

        Raises:
            UnknownIndexError: no index of that name (or None with several).
        """
        if name is None and len(self.served) == 1:
            return next(iter(self.served.values()))
        if name is None:
            raise InputError(f"name the index: this server serves {sorted(self.served)}")
        if name not in self.served:
            raise UnknownIndexError(f"unknown index {name!r}; this server serves {sorted(self.served)}")
        return self.served[name]

    def close(self) -> None:
        for served in self.served.values():
            served.close()

"""The engine protocol, the in-process engine and the factory that picks one."""
from __future__ import annotations

from typing import Any, Callable, Iterator, Protocol, Sequence, runtime_checkable

from sirerag.core.config import EngineConfig

#: a batch function: one batch of JSON-ready items in, one JSON-ready result per item out
Worker = Callable[[list[Any]], list[Any]]
#: builds a :data:`Worker` (loads its model); must pickle for a distributed engine
WorkerFactory = Callable[[], Worker]


@runtime_checkable
class Engine(Protocol):
    """Maps a worker over batches. ``name`` is ``local`` or ``ray``; ``actors`` is how many
    workers run at once (callers size their batches by it)."""

    @property
    def name(self) -> str: ...

    @property
    def actors(self) -> int: ...

    def map_batches(self, factory: WorkerFactory, batches: Sequence[list[Any]], *,  # Any: JSON-ready items
                    label: str) -> Iterator[tuple[int, list[Any]]]:
        """Yield ``(index into batches, results)`` for every batch, in any order, as each
        finishes. Raises :class:`~sirerag.core.errors.SireragError` naming ``label`` when a batch
        fails for good; batches yielded before stay valid."""
        ...

    def close(self) -> None: ...


class LocalEngine:
    """Runs every batch in this process, in order, with one worker built on first use."""

    name = "local"
    actors = 1

    def map_batches(self, factory: WorkerFactory, batches: Sequence[list[Any]], *,  # Any: JSON-ready items
                    label: str) -> Iterator[tuple[int, list[Any]]]:
        if not batches:
            return
        worker = factory()
        for index, batch in enumerate(batches):
            yield index, worker(batch)

    def close(self) -> None:
        return None


def runs_here(engine: Engine | None) -> bool:
    """Whether batches on ``engine`` run in this process (None: no engine, the same), known by the engine's
    type: a model loaded here can serve them, no picklable worker factory is needed."""
    return engine is None or isinstance(engine, LocalEngine)


def make_engine(config: EngineConfig) -> Engine:
    """The engine ``config.name`` names; a Ray engine connects (or starts Ray) here, so an
    unreachable address stops the build before any work.

    Raises:
        ConfigError: the Ray address does not answer within ``config.connect_timeout``.
        MissingExtraError: ``ray`` is chosen and the ``ray`` extra is not installed.
    """
    config.validate()
    if config.name == "local":
        return LocalEngine()
    from sirerag.engine.ray_engine import RayEngine

    return RayEngine(config)

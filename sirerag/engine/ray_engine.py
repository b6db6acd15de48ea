"""The Ray engine: batches run on a Ray Data actor pool, one model per actor.

``ray.data.from_items`` holds one row per batch (its items as JSON), ``map_batches`` runs
them on ``engine.actors`` actors (``ActorPoolStrategy``), each of which builds its worker
(loads its model) once, and the driver reads the results back as they finish
(``iter_rows``), so it can store each batch in its caches before the next arrives.
Ray restarts an actor that dies (``max_restarts``) and retries its batch
(``max_task_retries``); an error raised by a worker fails the stage at once.

Items and results travel as JSON text, so nothing of ours is pickled but the worker
factory (a small object holding a model spec and settings).
"""
from __future__ import annotations

import json
import logging
import os
import socket
import warnings
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import urlsplit

from sirerag.core.config import EngineConfig
from sirerag.core.errors import ConfigError, SireragError, require

logger = logging.getLogger(__name__)

#: test switch, read by the driver and handed to the actors: ``N:MARKER`` makes the first actor
#: that reaches its N-th batch create the file MARKER and exit hard (once per MARKER); ``N`` alone
#: makes every actor exit on its N-th batch (a batch that keeps failing)
TEST_EXIT_ENV = "SIRERAG_TEST_ACTOR_EXIT"


class EngineError(SireragError):
    """A batch failed for good on the engine (after Ray's restarts and retries)."""


class RayEngine:
    """Connects to Ray (or starts a local instance) and maps workers over batches.

    Args:
        config: the ``[engine]`` settings (``name = "ray"``).

    Raises:
        ConfigError: ``config.address`` does not answer within ``config.connect_timeout``.
        MissingExtraError: the ``ray`` extra is not installed.
    """

    name = "ray"

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self._ray = require("ray", "ray", purpose="--engine ray")
        require("ray.data", "ray", purpose="--engine ray")
        self._connected_here = False
        if config.address is not None:
            check_reachable(config.address, config.connect_timeout)
        if self._ray.is_initialized():
            logger.info("engine ray: using the Ray instance this process is already connected to")
        else:
            self._connect()
        data = require("ray.data", "ray", purpose="--engine ray")
        context = data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False

    @property
    def actors(self) -> int:
        return self.config.actors

    def _connect(self) -> None:
        address = self.config.address
        if address is None:
            self._ray.init(num_cpus=self.config.num_cpus or None, include_dashboard=False, log_to_driver=False,
                           configure_logging=False)
            logger.info("engine ray: started a local Ray instance (%s CPUs)", self.config.num_cpus or "all")
        else:
            try:
                self._ray.init(address=address, log_to_driver=False, configure_logging=False)
            except (ConnectionError, RuntimeError) as exc:
                raise ConfigError(f"engine.address {address!r}: could not join the Ray cluster: "
                                  f"{_last_line(exc)}") from None
            logger.info("engine ray: joined the Ray cluster at %s", address)
        self._connected_here = True

    def map_batches(self, factory: Callable[[], Callable[[list[Any]], list[Any]]],  # Any: JSON-ready items
                    batches: Sequence[list[Any]], *, label: str) -> Iterator[tuple[int, list[Any]]]:
        """See :class:`~sirerag.engine.base.Engine`."""
        if not batches:
            return
        data = require("ray.data", "ray", purpose="--engine ray")
        rows = [{"i": i, "payload": json.dumps(batch, ensure_ascii=False)} for i, batch in enumerate(batches)]
        with warnings.catch_warnings():  # max_restarts / max_task_retries have no named parameter yet
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
            dataset = self._dataset(data, rows, factory)
        logger.info("engine ray: %s: %d batch(es) on %d actor(s)", label, len(rows), min(self.config.actors, len(rows)))
        try:
            for row in dataset.iter_rows():
                yield int(row["i"]), json.loads(str(row["result"]))
        except SireragError:
            raise
        except Exception as exc:  # noqa: BLE001 - Ray's task, actor and user-code errors have no common base
            raise EngineError(f"engine ray: {label} failed (Ray restarts an actor up to {self.config.max_restarts} "
                              f"times and retries a batch up to {self.config.max_task_retries} times; "
                              f"finished batches are cached): {_last_line(exc)}") from None

    def _dataset(self, data: Any, rows: list[dict[str, Any]], factory: Any) -> Any:
        resources: dict[str, Any] = {"num_cpus": self.config.actor_num_cpus}
        if self.config.actor_num_gpus:
            resources["num_gpus"] = self.config.actor_num_gpus
        return data.from_items(rows, override_num_blocks=len(rows)).map_batches(
            _BatchActor, fn_constructor_args=(factory, os.environ.get(TEST_EXIT_ENV)), batch_size=1,
            batch_format="numpy",
            compute=data.ActorPoolStrategy(size=min(self.config.actors, len(rows)), max_tasks_in_flight_per_actor=1),
            max_restarts=self.config.max_restarts, max_task_retries=self.config.max_task_retries, **resources)

    def close(self) -> None:
        """Disconnect from Ray (stopping the local instance this engine started)."""
        if self._connected_here and self._ray.is_initialized():
            self._ray.shutdown()
        self._connected_here = False


class _BatchActor:
    """One Ray actor: builds the worker once, then maps it over each row's batch."""

    def __init__(self, factory: Any, exit_switch: str | None) -> None:
        self.worker = factory()
        self.seen = 0
        self.exit_switch = exit_switch

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        indices, results = [], []
        for index, payload in zip(batch["i"], batch["payload"]):
            self.seen += 1
            self._maybe_exit()
            indices.append(int(index))
            results.append(json.dumps(self.worker(json.loads(str(payload))), ensure_ascii=False))
        return {"i": np.asarray(indices, dtype=np.int64), "result": np.asarray(results, dtype=object)}

    def _maybe_exit(self) -> None:
        if not self.exit_switch:
            return
        n, _, marker = self.exit_switch.partition(":")
        if self.seen != int(n):
            return
        if marker:
            try:
                with open(marker, "x", encoding="utf-8") as handle:  # only the first actor to get here exits
                    handle.write(str(os.getpid()))
            except FileExistsError:
                return
        os._exit(1)


def check_reachable(address: str, timeout: float) -> None:
    """Raise :class:`ConfigError` unless a TCP connection to the Ray ``address`` opens within
    ``timeout`` seconds (``ray.init`` itself waits minutes for a missing cluster)."""
    target = address.strip()
    if target == "auto":
        from ray._private import services  # how ray.init itself resolves "auto"

        try:
            target = services.canonicalize_bootstrap_address(target) or ""
        except (ConnectionError, ValueError, OSError) as exc:
            raise ConfigError(f"engine.address 'auto': no running Ray cluster found ({_last_line(exc)}); "
                              f"start one with 'ray start --head' or give HOST:PORT") from None
        if not target:
            raise ConfigError("engine.address 'auto': no running Ray cluster found on this machine; "
                              "start one with 'ray start --head' or give HOST:PORT")
    parts = urlsplit(target if "://" in target else f"ray://{target}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise ConfigError(f"engine.address must be 'auto', 'HOST:PORT' or 'ray://HOST:PORT', got {address!r}")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise ConfigError(f"engine.address {address!r}: no Ray cluster answers at {host}:{port} "
                          f"within {timeout:g}s ({exc.strerror or exc})") from None


def _last_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:400]


__all__ = ["TEST_EXIT_ENV", "EngineError", "RayEngine", "check_reachable"]

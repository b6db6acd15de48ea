"""Where a build's model stages run: the local process or a Ray cluster (:class:`EngineConfig`)."""
from __future__ import annotations

from dataclasses import dataclass

from sirerag.core.config.typecheck import check_types
from sirerag.core.errors import check


@dataclass(frozen=True)
class EngineConfig:
    """Where the model stages run (embedding, coreference rewrite, proposition extraction,
    cluster summaries); clustering (in this process and its own workers, ``clustering.processes``), trees and
    index writing always stay on this machine.

    ``name``: ``local`` (this process) or ``ray`` (Ray Data actor pools, extra ``ray``).
    ``address``: None starts a local Ray instance with ``num_cpus`` CPUs (0: all of them);
    ``auto``, ``HOST:PORT`` or ``ray://HOST:PORT`` joins a running cluster, and an address
    that does not answer within ``connect_timeout`` seconds stops the build.
    ``actors``: actors per stage (each loads one model); ``actor_num_cpus`` /
    ``actor_num_gpus``: resources each actor reserves. ``llm_batch_size``: LLM requests per
    Ray batch; each actor keeps ``llm.max_concurrency`` of them in flight. Embedding batches
    are the local engine's blocks (``16 * embedder.batch_size`` texts), so vectors match.
    ``max_restarts`` / ``max_task_retries``: how often Ray restarts a dead actor and retries
    its batch before the build fails."""

    name: str = "local"
    address: str | None = None
    num_cpus: int = 0
    actors: int = 2
    actor_num_cpus: float = 1.0
    actor_num_gpus: float = 0.0
    llm_batch_size: int = 16
    max_restarts: int = 3
    max_task_retries: int = 3
    connect_timeout: float = 10.0

    def validate(self) -> None:
        check_types(self, "engine")
        check(self.name in ("local", "ray"), "engine.name", self.name, "one of 'local', 'ray'")
        check(self.address is None or bool(self.address.strip()), "engine.address", self.address,
              "'auto', 'HOST:PORT' or 'ray://HOST:PORT' (or omitted for a local Ray instance)")
        check(self.num_cpus >= 0, "engine.num_cpus", self.num_cpus, "an integer >= 0 (0: every CPU)")
        check(self.actors >= 1, "engine.actors", self.actors, "an integer >= 1")
        check(self.actor_num_cpus > 0, "engine.actor_num_cpus", self.actor_num_cpus, "a number > 0")
        check(self.actor_num_gpus >= 0, "engine.actor_num_gpus", self.actor_num_gpus, "a number >= 0")
        check(self.llm_batch_size >= 1, "engine.llm_batch_size", self.llm_batch_size, "an integer >= 1")
        check(self.max_restarts >= 0, "engine.max_restarts", self.max_restarts, "an integer >= 0")
        check(self.max_task_retries >= 0, "engine.max_task_retries", self.max_task_retries, "an integer >= 0")
        check(self.connect_timeout > 0, "engine.connect_timeout", self.connect_timeout,
              "a positive number of seconds")

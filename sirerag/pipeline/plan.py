"""The build plan: the stages of a build in order, what each needs and what it writes.

A build (:mod:`sirerag.pipeline.build`), an incremental update (:mod:`sirerag.pipeline.update`)
and a dry run (:mod:`sirerag.pipeline.dryrun`) walk the same :class:`BuildPlan` with
different stage runners: real, incremental and counting. A runner has one method per stage
name; :meth:`BuildPlan.walk` calls them in order, times each, logs ``stage NAME ...`` and
reports ``on_stage(name, "start", 0.0)`` and ``on_stage(name, "end", seconds)`` to the caller
(the CLI, benchmarks, tests).

The stages (``*``: only with some settings):

========================  ==============================================================
``load``                  read the corpus, chunk it; writes documents and chunks
``query_export`` *        ``minilm`` embedder: the ONNX export for fast dense searches
``embed_leaves``          embed the chunks (the leaves of every tree)
``similarity_tree`` *     ``"similarity" in trees``: cluster and summarise the leaves
``extraction`` *          ``"relatedness" in trees`` or ``graph.enabled``: propositions
``relatedness_tree`` *    ``"relatedness" in trees``: propositions embedded, aggregates clustered, summarised
``pool``                  flatten the trees (or the leaves alone) into the retrieval pool
``bm25``                  the stored lexical index of the pool
``ann``                   the approximate dense index of the pool, when it has ``dense.ann_min_vectors`` vectors
``graph`` *               ``graph.enabled``: the entity graph for PPR (and, with no relatedness tree, the
                          propositions embedded for PPR's bridging)
========================  ==============================================================
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from sirerag.core.config import BuildConfig
from sirerag.extraction.extractor import FAILURES, REWRITES
from sirerag.pool.entry_table import IDS as ENTRY_IDS, LINES as ENTRY_LINES
from sirerag.pool.store import CHUNKS, DOCUMENTS, EMBEDDINGS, ENTRIES, PROPOSITIONS
from sirerag.trees.proposition_vectors import PROPOSITION_VECTORS

logger = logging.getLogger(__name__)

#: ``on_stage(stage, event, seconds)``: ``event`` is ``"start"`` (seconds 0.0) or ``"end"`` (the stage's wall
#: seconds). Called in the building thread; an exception it raises stops the run.
StageHook = Callable[[str, str, float], None]

#: The models a stage may ask for: the embedder, the summariser (the LLM's when ``llm.spec`` is set, else the
#: offline extractive one) and the extraction LLM (``extraction.extractor = "llm"``).
MODELS = ("embedder", "summarizer", "extraction_llm")


@dataclass(frozen=True)
class Stage:
    """One step of a build.

    Attributes:
        name: the stage name (the key of its time in ``timings`` and of the runner's method).
        models: what it asks for (of :data:`MODELS`).
        needs: outputs of earlier stages it reads.
        gives: outputs it hands to later stages.
        writes: index files and manifest components it writes (``component:NAME`` for a component).
    """

    name: str
    models: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    gives: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildPlan:
    """The stages a build with one configuration runs, in order."""

    stages: tuple[Stage, ...]

    @classmethod
    def from_config(cls, config: BuildConfig) -> "BuildPlan":
        """The plan of ``config`` (validated or not: only its switches are read)."""
        trees, graph = set(config.trees), config.graph.enabled
        llm_extraction = config.extraction.extractor == "llm"
        stages = [Stage("load", needs=("corpus",), gives=("documents", "chunks"), writes=(DOCUMENTS, CHUNKS))]
        if config.embedder.spec == "minilm":
            stages.append(Stage("query_export", writes=("component:embedder.query_export",)))
        stages.append(Stage("embed_leaves", models=("embedder",), needs=("chunks",), gives=("leaf_embeddings",)))
        if "similarity" in trees:
            stages.append(Stage("similarity_tree", models=("embedder", "summarizer"),
                                needs=("chunks", "leaf_embeddings"), gives=("similarity_tree",)))
        if "relatedness" in trees or graph:  # the graph is made of the propositions too
            stages.append(Stage("extraction", models=("extraction_llm",) if llm_extraction else (),
                                needs=("documents", "chunks"), gives=("propositions",),
                                writes=(PROPOSITIONS, FAILURES, REWRITES) if llm_extraction and
                                config.extraction.rewrite else (PROPOSITIONS, FAILURES)))
        if "relatedness" in trees:
            stages.append(Stage("relatedness_tree", models=("embedder", "summarizer"), needs=("propositions",),
                                gives=("relatedness_tree",), writes=(PROPOSITION_VECTORS,)))
        tree_outputs = tuple(f"{t}_tree" for t in ("similarity", "relatedness") if t in trees)
        stages.append(Stage("pool", needs=("chunks", "leaf_embeddings", *tree_outputs), gives=("pool",),
                            writes=(ENTRIES, EMBEDDINGS, ENTRY_IDS, ENTRY_LINES, "component:pool")))
        stages.append(Stage("bm25", needs=("pool",), writes=("component:bm25",)))
        stages.append(Stage("ann", needs=("pool",), writes=("component:ann",)))
        if graph:
            vectors = () if "relatedness" in trees else (PROPOSITION_VECTORS,)  # for bridging, if no tree did
            stages.append(Stage("graph", models=("embedder",), needs=("documents", "propositions"),
                                writes=("component:graph", *vectors)))
        return cls(tuple(stages))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def stage(self, name: str) -> Stage:
        """The stage called ``name``; KeyError when the plan has none."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"the plan has no stage {name!r} (it has {', '.join(self.names)})")

    @property
    def models(self) -> tuple[str, ...]:
        """The models some stage asks for, in :data:`MODELS` order."""
        used = {m for s in self.stages for m in s.models}
        return tuple(m for m in MODELS if m in used)

    def walk(self, runner: object, *, timings: dict[str, float] | None = None,
             on_stage: StageHook | None = None) -> dict[str, float]:
        """Run ``runner.<stage name>(stage)`` for every stage in order; returns the wall seconds of each (also
        recorded in ``timings``). A stage that raises stops the walk (its end is not reported)."""
        timings = {} if timings is None else timings
        for stage in self.stages:
            step = getattr(runner, stage.name)
            logger.info("stage %s ...", stage.name)
            if on_stage is not None:
                on_stage(stage.name, "start", 0.0)
            start = time.perf_counter()
            step(stage)
            timings[stage.name] = round(time.perf_counter() - start, 3)
            if on_stage is not None:
                on_stage(stage.name, "end", timings[stage.name])
        return timings

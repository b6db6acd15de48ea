"""Where the model stages run: one seam, "map this batch function over these batches".

A stage (embedding, coreference rewrite, proposition extraction, cluster summaries) hands
an :class:`Engine` a *worker factory* and a list of batches. The factory is a picklable
callable that loads the model once per process and returns the batch function; the engine
yields ``(batch index, results)`` as batches finish, and the caller (the driver) stores the
results in its caches. :class:`LocalEngine` runs the batches in this process, one after
another; :class:`~sirerag.engine.ray_engine.RayEngine` runs them on a Ray Data actor pool
(extra ``ray``), one model per actor.

Layer: after ``io``, before ``tokens``/``llm``; it imports no model code itself.
"""
from __future__ import annotations

from sirerag.engine.base import Engine, LocalEngine, Worker, WorkerFactory, make_engine, runs_here

__all__ = ["Engine", "LocalEngine", "Worker", "WorkerFactory", "make_engine", "runs_here"]

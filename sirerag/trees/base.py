"""The summariser protocol shared by both trees."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from sirerag.types import Node


@runtime_checkable
class Summarizer(Protocol):
    """Summarises groups of texts, one summary per group, in order.

    ``spec`` says which algorithm wrote the summaries (``extractive:...`` for the
    offline algorithm, ``llm:<llm spec>`` for a model); it is recorded in the
    index manifest so a reader never mistakes one for the other.
    """

    @property
    def spec(self) -> str: ...

    def summarize(self, groups: Sequence[Sequence[str]]) -> list[str]: ...


@dataclass(frozen=True, eq=False)
class TreeResult:
    """All nodes of one tree (leaves or aggregates first, then each summary level in
    order) with their embeddings, row ``i`` belonging to ``nodes[i]``."""

    nodes: tuple[Node, ...]
    embeddings: np.ndarray
    stats: dict = field(default_factory=dict)

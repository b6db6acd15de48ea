"""The summariser protocol and the result records shared by both trees."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from sirerag.core.types import Node


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


class CountingSummarizer:
    """Wraps a summariser and counts what it is asked for: ``calls`` (requests, e.g. one per
    summary level) and ``groups`` (summaries written, what an LLM summariser pays per call).
    For measuring what a build or an update costs without paying for it."""

    def __init__(self, inner: Summarizer) -> None:
        self.inner, self.calls, self.groups = inner, 0, 0

    @property
    def spec(self) -> str:
        return self.inner.spec

    def summarize(self, groups: Sequence[Sequence[str]]) -> list[str]:
        self.calls += 1
        self.groups += len(groups)
        return self.inner.summarize(groups)


@dataclass(frozen=True)
class TreeStats:
    """How a tree was built; :meth:`to_dict` is what the manifest records under
    ``counts.<tree>_tree`` (fields that do not apply are left out).

    Attributes:
        variant, table3, aggregation_rule: relatedness tree only: the ablation variant,
            the paper's Table 3 figures of its aggregates and the aggregation rule.
        levels: ``{"level", "nodes", ...}`` per level, leaves (or aggregates) first.
        stop_reason: why no further level was built.
        seconds, clustering: time per step and clustering counters of the summary levels.
        nodes, by_kind: relatedness tree only: its node count, and per kind.
    """

    variant: str | None = None
    table3: Mapping[str, Any] | None = None
    aggregation_rule: str | None = None
    levels: tuple[Mapping[str, Any], ...] = ()
    stop_reason: str | None = None
    seconds: Mapping[str, float] | None = None
    clustering: Mapping[str, Any] | None = None
    nodes: int | None = None
    by_kind: Mapping[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = [dict(v) for v in value] if f.name == "levels" else \
                    dict(value) if isinstance(value, Mapping) else value
        return out


@dataclass(frozen=True, eq=False)
class TreeResult:
    """All nodes of one tree (leaves or aggregates first, then each summary level in
    order) with their embeddings, row ``i`` belonging to ``nodes[i]``."""

    nodes: tuple[Node, ...]
    embeddings: np.ndarray
    stats: TreeStats = field(default_factory=TreeStats)

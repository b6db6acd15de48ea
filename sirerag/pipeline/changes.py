"""What an add or remove changes: the plan of documents, and the history and drift it records."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from sirerag.core.config.typecheck import check_types
from sirerag.core.errors import InputError, check
from sirerag.core.io import read_jsonl
from sirerag.core.io.manifest import Drift, HistoryEntry, Manifest
from sirerag.core.types import Document

#: Share of leaves added or removed since the last full build past which a warning suggests rebuilding.
DEFAULT_DRIFT_WARN = 0.3
#: Share of a cluster's member tokens that may change before its summary is written again.
DEFAULT_REFRESH_THRESHOLD = 0.3


@dataclass(frozen=True)
class UpdateConfig:
    """Settings of one add/remove (the build's settings come from the index's manifest).

    ``refresh_threshold``: a changed cluster keeps its summary text while the tokens of member
    texts added or dropped since that text was written are at most this share of its members'
    tokens (bounded staleness); 0 rewrites every cluster whose members' texts changed.
    ``drift_warn``: share of leaves added or removed since the last full build past which a
    warning suggests ``sirerag build``.
    """

    refresh_threshold: float = DEFAULT_REFRESH_THRESHOLD
    drift_warn: float = DEFAULT_DRIFT_WARN

    def validate(self) -> "UpdateConfig":
        check_types(self, "update")
        check(0.0 <= self.refresh_threshold <= 1.0, "update.refresh_threshold (--refresh-threshold)",
              self.refresh_threshold, "a share between 0 and 1")
        check(self.drift_warn >= 0.0, "update.drift_warn (--drift-warn)", self.drift_warn, "a share >= 0")
        return self


@dataclass(frozen=True)
class Plan:
    """Documents of the updated index (old ones kept, then new ones, in order) and what changed."""

    documents: tuple[Document, ...]
    added: tuple[Document, ...]
    removed: frozenset[str]
    updated: tuple[str, ...]
    skipped: int

    @property
    def empty(self) -> bool:
        return not self.added and not self.removed


def plan_changes(old: Sequence[Document], *, add: Sequence[Document] = (), remove: Iterable[str] = ()) -> Plan:
    """The documents after removing ``remove`` and adding ``add``.

    A document of ``add`` whose id is in the index with the same title, section and text is skipped; with
    another text it is an update (its old version is removed, the new one added).

    Raises:
        InputError: an id of ``remove`` is not in the index (every unknown id is named).
    """
    by_id = {d.id: d for d in old}
    remove = list(dict.fromkeys(remove))
    unknown = [i for i in remove if i not in by_id]
    if unknown:
        shown = ", ".join(unknown[:20]) + (f" and {len(unknown) - 20} more" if len(unknown) > 20 else "")
        raise InputError(f"{len(unknown)} document id(s) not in the index: {shown}; nothing was changed")
    removed = set(remove)
    added: list[Document] = []
    updated: list[str] = []
    skipped = 0
    for doc in dict((d.id, d) for d in add).values():  # a repeated id: its last version
        known = by_id.get(doc.id)
        if known is not None and doc.id not in removed:
            if (known.text, known.title, known.section) == (doc.text, doc.title, doc.section):
                skipped += 1
                continue
            removed.add(doc.id)
            updated.append(doc.id)
        added.append(doc)
    kept = tuple(d for d in old if d.id not in removed)
    return Plan(documents=kept + tuple(added), added=tuple(added), removed=frozenset(removed),
                updated=tuple(updated), skipped=skipped)


def merged_records(path: Path, removed: frozenset[str], new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of an index's per-chunk record file (extraction failures, rewrites) without the removed
    documents' rows, then ``new``."""
    old = [r for r in read_jsonl(path) if r.get("doc_id") not in removed] if path.is_file() else []
    return old + list(new)


def record_change(manifest: Manifest, *, command: str, plan: Plan, leaves_before: int, leaves_added: int,
                  leaves_removed: int, summaries_written: int, chunks_extracted: int, summaries_stale: int = 0,
                  stale_in_index: int = 0, refresh_threshold: float = 0.0) -> dict[str, Any]:
    """Append the change to the manifest's ``history`` and update its ``drift`` (in place);
    returns the drift record (as the manifest writes it).

    Drift is a share, from 0 to 1: the leaves added or removed since the last full build, over every leaf
    the index has held since (that build's and those added), at most 1 (a leaf added and removed again counts
    in both); an index without a drift record (a full build) starts from ``leaves_before``.
    ``summaries_stale`` (this change) and ``stale_in_index`` (after it) count summaries that kept
    their text although their members changed (``refresh_threshold``).
    """
    manifest.history.append(HistoryEntry.from_dict({
        "command": command, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "documents_added": len(plan.added) - len(plan.updated), "documents_updated": len(plan.updated),
        "documents_removed": len(plan.removed) - len(plan.updated), "documents_skipped": plan.skipped,
        "leaves_added": leaves_added, "leaves_removed": leaves_removed,
        "summaries_written": summaries_written, "summaries_stale": summaries_stale,
        "refresh_threshold": refresh_threshold, "chunks_extracted": chunks_extracted,
    }))
    drift = manifest.drift or Drift(leaves_at_full_build=leaves_before)
    drift.leaves_added += leaves_added
    drift.leaves_removed += leaves_removed
    drift.share = drift.measured_share
    drift.summaries_stale = stale_in_index
    manifest.drift = drift
    return drift.to_dict()

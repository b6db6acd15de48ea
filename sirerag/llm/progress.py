"""Sending many LLM requests with a progress bar."""
from __future__ import annotations

from typing import Sequence

from sirerag.llm.base import LLM, Completion, LLMCallError, LLMRequest


def run_requests(llm: LLM, requests: Sequence[LLMRequest], *, desc: str, show_progress: bool = True,
                 slice_size: int = 32) -> list[Completion | LLMCallError]:
    """``llm.complete_many(requests, return_exceptions=True)`` in slices, so a progress bar
    can advance; results are in request order and a failed item is its :class:`LLMCallError`."""
    from tqdm.auto import tqdm

    slice_size = max(slice_size, int(getattr(llm, "preferred_slice", 0)))  # an engine wants its workers fed
    out: list[Completion | LLMCallError] = []
    with tqdm(total=len(requests), desc=desc, unit="call", disable=not show_progress or not requests) as bar:
        for start in range(0, len(requests), slice_size):
            batch = list(requests[start:start + slice_size])
            out.extend(llm.complete_many(batch, return_exceptions=True))
            bar.update(len(batch))
    return out

"""Cluster summaries written by an LLM (RAPTOR's recursive summaries).

Each group's texts are joined with blank lines into :data:`~sirerag.llm.prompts.SUMMARY`
and the groups of a call go to the model in slices of ``complete_many`` (so the
backend batches or parallelises them, the call cache stores each as it arrives and
a progress bar advances). If any item fails after the backend's retries, :meth:`LLMSummarizer.summarize`
raises: no placeholder is ever stored as a summary. Completed items stay in the
call cache, so a rerun pays only for the failed ones.
"""
from __future__ import annotations

import logging
from typing import Sequence

from sirerag.core.errors import check
from sirerag.llm.base import LLM, Completion, LLMCallError, LLMRequest
from sirerag.llm.progress import run_requests
from sirerag.llm.prompts import SUMMARY

logger = logging.getLogger(__name__)


def summary_request(texts: Sequence[str], max_tokens: int, temperature: float = 0.0) -> LLMRequest:
    """The request that summarises one group (also used by the dry run to count tokens)."""
    context = "\n\n".join(t.strip() for t in texts if t.strip())
    return SUMMARY.request(max_tokens=max_tokens, temperature=temperature, context=context)


class LLMSummarizer:
    """Summarises groups of texts through an LLM.

    Args:
        llm: any object following the :class:`~sirerag.llm.base.LLM` protocol.
        max_tokens: completion budget of each summary.
        temperature: 0 for greedy decoding (the default, reproducible and cacheable).
        show_progress: a progress bar over the summaries of each level.

    Raises:
        ConfigError: ``max_tokens`` is not a positive integer.
    """

    def __init__(self, llm: LLM, max_tokens: int = 100, *, temperature: float = 0.0,
                 show_progress: bool = False) -> None:
        check(isinstance(max_tokens, int) and max_tokens >= 1, "max_tokens", max_tokens, "a positive integer")
        self.llm = llm
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.show_progress = show_progress

    @property
    def spec(self) -> str:
        return "llm:" + self.llm.spec

    def summarize(self, groups: Sequence[Sequence[str]]) -> list[str]:
        """One summary per group, in order; a group without text gives an empty summary.

        Raises:
            LLMCallError: at least one group could not be summarised (the message says
                how many and quotes the first error).
        """
        positions = [i for i, g in enumerate(groups) if any(t.strip() for t in g)]
        requests = [summary_request(groups[i], self.max_tokens, self.temperature) for i in positions]
        out = [""] * len(groups)
        if not requests:
            return out
        results = run_requests(self.llm, requests, desc="summaries (LLM)", show_progress=self.show_progress)
        failures = [(i, r) for i, r in zip(positions, results) if isinstance(r, Exception)]
        if failures:
            first_group, first_error = failures[0]
            raise LLMCallError(
                f"{len(failures)} of {len(requests)} cluster summaries failed with {self.llm.spec} "
                f"(first: group {first_group}: {first_error}); completed ones are cached, rerun to retry the rest"
            )
        for i, result in zip(positions, results):
            if not isinstance(result, Completion):
                continue  # never: a failure raised above
            text = result.text.strip()
            if not text:
                logger.warning("%s returned an empty summary for group %d (%d texts)", self.llm.spec, i, len(groups[i]))
            out[i] = text
        return out

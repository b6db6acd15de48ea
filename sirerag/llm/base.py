"""The LLM protocol: chat messages in, text with token usage out.

Every LLM stage of SiReRAG (cluster summaries, coreference rewrite, proposition
extraction, the QA reader, teacher data) talks to an object of this shape, so a
backend is chosen by the caller and swapped without touching the stages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Literal, Protocol, Sequence, get_args, overload, runtime_checkable

from sirerag.core.errors import SireragError

Role = Literal["system", "user", "assistant"]
ROLES: tuple[str, ...] = get_args(Role)


@dataclass(frozen=True)
class LLMRequest:
    """One chat completion request.

    Attributes:
        messages: ``(role, content)`` pairs in order.
        max_tokens: completion budget.
        temperature: 0 means greedy decoding.
        json_mode: ask the backend to constrain output to a JSON object where it can.
        prompt_version: ``name@version`` of the prompt template; part of the cache key.
    """

    messages: tuple[tuple[Role, str], ...]
    max_tokens: int = 256
    temperature: float = 0.0
    json_mode: bool = False
    prompt_version: str = ""

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("LLMRequest.messages must not be empty")
        for role, _content in self.messages:
            if role not in ROLES:
                raise ValueError(f"LLMRequest.messages: role must be system, user or assistant, got {role!r}")

    def as_openai(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]


@dataclass(frozen=True)
class Completion:
    """Model output with usage; ``cached`` is True when it came from the call cache."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool = False
    finish_reason: str = ""


class LLMCallError(SireragError, RuntimeError):
    """A call failed permanently (after retries, or a non-retryable error such as a 4xx); the
    message names the model and the endpoint, never a key."""


class TransientLLMError(LLMCallError):
    """A call failed in a way worth retrying (429, 5xx, timeout, connection reset)."""


@runtime_checkable
class LLM(Protocol):
    """What every backend provides.

    ``spec`` identifies backend and model (never a key or secret) and is part of
    every cache key; ``complete_many`` may run requests concurrently or batched.
    """

    @property
    def spec(self) -> str: ...

    def complete(self, request: LLMRequest) -> Completion: ...

    @overload
    def complete_many(self, requests: Sequence[LLMRequest]) -> list[Completion]: ...

    @overload
    def complete_many(
        self, requests: Sequence[LLMRequest], *, return_exceptions: bool
    ) -> list[Completion | LLMCallError]: ...

    def complete_many(self, requests: Sequence[LLMRequest], *, return_exceptions: bool = False
                      ) -> list[Completion] | list[Completion | LLMCallError]:
        """Complete every request, in order. With ``return_exceptions`` a failed item is
        returned as its :class:`LLMCallError` instead of raising, so one bad item never
        loses the others' results."""
        ...


class Batching:
    """``complete`` and ``complete_many`` of a backend (see :class:`LLM`) over its :meth:`complete_all`, which
    returns every result, a failure as its :class:`LLMCallError`."""

    def complete_all(self, requests: Sequence[LLMRequest]) -> list[Completion | LLMCallError]:
        raise NotImplementedError

    def complete(self, request: LLMRequest) -> Completion:
        return self.complete_many([request])[0]

    @overload
    def complete_many(self, requests: Sequence[LLMRequest]) -> list[Completion]: ...

    @overload
    def complete_many(
        self, requests: Sequence[LLMRequest], *, return_exceptions: bool
    ) -> list[Completion | LLMCallError]: ...

    def complete_many(self, requests: Sequence[LLMRequest], *, return_exceptions: bool = False
                      ) -> list[Completion] | list[Completion | LLMCallError]:
        """Complete every request, in order (see :class:`LLM`)."""
        results = self.complete_all(requests)
        if not return_exceptions:
            for result in results:
                if isinstance(result, LLMCallError):
                    raise result
        return results


class StreamingLLM(Batching):
    """Base class for backends that yield results as they finish.

    A subclass implements :meth:`iter_complete`, yielding ``(position, result)`` pairs
    in any order, where ``result`` is a :class:`Completion` or the
    :class:`LLMCallError` of that item; ``complete`` and ``complete_many`` follow.
    The call cache stores each result as soon as it is yielded.
    """

    if TYPE_CHECKING:  # a backend's spec is a read-only property or an attribute set in __init__
        @property
        def spec(self) -> str: ...

    def iter_complete(self, requests: Sequence[LLMRequest]) -> Iterator[tuple[int, Completion | LLMCallError]]:
        raise NotImplementedError

    def complete_all(self, requests: Sequence[LLMRequest]) -> list[Completion | LLMCallError]:
        results: list[Completion | LLMCallError | None] = [None] * len(requests)
        for position, result in self.iter_complete(requests):
            results[position] = result
        return results  # type: ignore[return-value]  # every position is filled: iter_complete yields each once

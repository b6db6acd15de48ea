"""A chat completion reply read and checked before anything uses or caches it.

The body is read up to a byte cap that follows the request's ``max_tokens`` (so a server that
ignores the budget cannot fill memory), parsed as JSON and checked: ``choices`` must be a
non-empty list whose first ``message.content`` is a string. Anything else is a
:class:`~sirerag.llm.http.BadReply`, which the retry policy treats like a 5xx: retried, then one
line, never stored in the call cache.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

from sirerag.llm.accounting import completion_tokens, request_tokens
from sirerag.llm.base import Completion, LLMRequest
from sirerag.llm.http import BadReply

#: bytes a reply may take besides its completion (ids, usage, logprobs of a short answer)
REPLY_OVERHEAD = 64 << 10
#: bytes allowed per requested completion token (a token is a few bytes; JSON escaping at most doubles
#: them; logprobs and reasoning fields add more)
BYTES_PER_TOKEN = 64
#: the hard cap of any reply, whatever ``max_tokens`` asks
MAX_REPLY_BYTES = 16 << 20


def reply_cap(max_tokens: int) -> int:
    """The most bytes read of a reply to a request with ``max_tokens``."""
    return min(MAX_REPLY_BYTES, REPLY_OVERHEAD + BYTES_PER_TOKEN * max(1, int(max_tokens)))


def read_capped(chunks: Iterable[bytes], cap: int) -> bytes:
    """Join ``chunks`` until more than ``cap`` bytes arrive (then :class:`BadReply`, the rest unread)."""
    parts, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > cap:
            raise BadReply(f"reply over {cap} bytes (the request asked for a bounded completion)")
        parts.append(chunk)
    return b"".join(parts)


def _tokens(usage: Any, name: str) -> int | None:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_completion(body: bytes, request: LLMRequest) -> Completion:
    """The :class:`Completion` of a chat completion body.

    Raises:
        BadReply: not JSON, no or empty ``choices``, or a ``content`` that is not a string.
    """
    try:
        reply = json.loads(body)
    except (ValueError, RecursionError) as exc:  # includes a cut-off body and bytes that are not UTF-8
        raise BadReply(f"the body is not JSON ({type(exc).__name__}: {str(exc)[:80]})") from None
    if not isinstance(reply, dict):
        raise BadReply(f"the body is a JSON {type(reply).__name__}, not an object")
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BadReply("the reply has no choices" if not choices else "'choices' is not a list")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise BadReply(f"the message content is {type(content).__name__ if content is not None else 'missing'}, "
                       "not a string")
    finish = choice.get("finish_reason")
    usage = reply.get("usage")
    prompt, output = _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")
    return Completion(
        text=content,
        prompt_tokens=prompt if prompt is not None else request_tokens(request),
        completion_tokens=output if output is not None else completion_tokens(content),
        finish_reason=finish if isinstance(finish, str) else "",
    )

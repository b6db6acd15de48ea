"""A forgiving JSON reader for model output.

:func:`loads_lenient` reads standard JSON exactly as :func:`json.loads` does and,
beyond it, the mistakes small models make: single-quoted strings (an apostrophe
followed by a letter stays inside the string), unescaped inner double quotes,
trailing or doubled commas, missing commas between members, unquoted keys and
words, Python literals (``True``/``False``/``None``), raw newlines in strings,
and output cut off in the middle (every container still open is closed, and the
member that was being written when the text ended is dropped, never kept half
written; :func:`loads_lenient` can keep the complete parts of it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "'": "'"}
_STOP = set(",:{}[]\n")


class JSONSyntaxError(ValueError):
    """The text cannot be read as JSON even leniently; ``pos`` is the offending offset."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(f"{message} at offset {pos}")
        self.pos = pos


class _EOF(Exception):
    """The text ended inside a value."""


@dataclass
class LenientValue:
    """A value read by :func:`loads_lenient`.

    Attributes:
        value: the JSON value (partial when ``complete`` is False).
        end: offset just after the value in the text.
        complete: False when the text ended before the value was closed.
        repairs: names of the repairs that were needed (empty for valid JSON).
    """

    value: Any
    end: int
    complete: bool = True
    repairs: set[str] = field(default_factory=set)


class _Reader:
    def __init__(self, text: str, keep_partial: bool = False) -> None:
        self.s = text
        self.i = 0
        self.repairs: set[str] = set()
        self.keep_partial = keep_partial

    def ws(self) -> None:
        s, n = self.s, len(self.s)
        while self.i < n and s[self.i] in " \t\r\n":
            self.i += 1

    def peek(self) -> str:
        self.ws()
        if self.i >= len(self.s):
            raise _EOF
        return self.s[self.i]

    def value(self) -> tuple[Any, bool]:
        ch = self.peek()
        if ch == "{":
            return self.container("{", "}")
        if ch == "[":
            return self.container("[", "]")
        if ch in "\"'":
            return self.string(ch), True
        return self.bare(), True

    def container(self, left: str, right: str) -> tuple[Any, bool]:
        is_object = left == "{"
        out: Any = {} if is_object else []
        self.i += 1
        expecting_member = True
        while True:
            try:
                ch = self.peek()
            except _EOF:
                self.repairs.add("truncated")
                return out, False
            if ch == right:
                self.i += 1
                return out, True
            if ch in "}]":  # the wrong closer: close this container here
                self.repairs.add("mismatched_bracket")
                self.i += 1
                return out, True
            if ch == ",":
                if expecting_member:
                    self.repairs.add("extra_comma")
                self.i += 1
                expecting_member = True
                continue
            if not expecting_member:
                self.repairs.add("missing_comma")
            start = self.i
            try:
                if is_object:
                    key = self.key()
                    if self.peek() != ":":
                        raise JSONSyntaxError(f"expected ':' after key {key!r}", self.i)
                    self.i += 1
                    item, complete = self.value()
                else:
                    item, complete = self.value()
            except _EOF:
                self.repairs.add("truncated")
                return out, False
            if self.i == start:
                raise JSONSyntaxError(f"unexpected character {self.s[self.i]!r}", self.i)
            if not complete:  # the text ended inside this member: drop it (or keep what it holds)
                if self.keep_partial and item:
                    if is_object:
                        out[key] = item
                    else:
                        out.append(item)
                return out, False
            if is_object:
                out[key] = item
            else:
                out.append(item)
            expecting_member = False
            try:
                trailing = self.peek()
            except _EOF:
                self.repairs.add("truncated")
                return out, False
            if trailing == "," and self._next_after_comma() == right:
                self.repairs.add("trailing_comma")

    def _next_after_comma(self) -> str:
        j = self.i + 1
        while j < len(self.s) and self.s[j] in " \t\r\n":
            j += 1
        return self.s[j] if j < len(self.s) else ""

    def key(self) -> str:
        ch = self.peek()
        if ch in "\"'":
            return self.string(ch)
        self.repairs.add("unquoted_key")
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in ":,{}[]\n":
            self.i += 1
        if self.i >= len(self.s):
            raise _EOF
        return self.s[start:self.i].strip()

    def string(self, quote: str) -> str:
        if quote == "'":
            self.repairs.add("single_quotes")
        s, n = self.s, len(self.s)
        self.i += 1
        parts: list[str] = []
        while True:
            if self.i >= n:
                raise _EOF
            ch = s[self.i]
            if ch == "\\":
                if self.i + 1 >= n:
                    raise _EOF
                nxt = s[self.i + 1]
                if nxt == "u" and self.i + 6 <= n:
                    try:
                        parts.append(chr(int(s[self.i + 2:self.i + 6], 16)))
                        self.i += 6
                        continue
                    except ValueError:
                        pass
                if nxt not in _ESCAPES:
                    self.repairs.add("bad_escape")
                parts.append(_ESCAPES.get(nxt, nxt))
                self.i += 2
                continue
            if ch == quote and self._closes(self.i + 1):
                self.i += 1
                return "".join(parts)
            if ch == quote:
                self.repairs.add("inner_quote")
            elif ch == "\n":
                self.repairs.add("newline_in_string")
            parts.append(ch)
            self.i += 1

    def _closes(self, j: int) -> bool:
        """Does a quote whose next character is at ``j`` end its string? Only if what
        follows (after spaces) is a JSON delimiter, a line break or the end of text."""
        s, n = self.s, len(self.s)
        while j < n and s[j] in " \t\r":
            j += 1
        return j >= n or s[j] in ",:}]\n"

    def bare(self) -> Any:
        start = self.i
        s, n = self.s, len(self.s)
        while self.i < n and s[self.i] not in _STOP:
            self.i += 1
        if self.i >= n:
            raise _EOF  # a bare word cut by the end of the text may be incomplete
        word = s[start:self.i].strip()
        if not word:
            raise JSONSyntaxError(f"unexpected character {s[start]!r}", start)
        if word in _LITERALS:
            if word not in ("true", "false", "null"):
                self.repairs.add("python_literal")
            return _LITERALS[word]
        try:
            return int(word) if word.lstrip("-").isdigit() else float(word)
        except ValueError:
            self.repairs.add("unquoted_value")
            return word


def loads_lenient(text: str, start: int = 0, *, keep_partial: bool = False) -> LenientValue:
    """Read one JSON value beginning at ``text[start]`` (after white space).

    With ``keep_partial``, a container cut off by the end of the text keeps the members it
    had read in full (a string or number cut in the middle is still dropped).

    Returns:
        A :class:`LenientValue`; ``complete`` is False when the text ended inside it.

    Raises:
        JSONSyntaxError: no value can be read at ``start``.
    """
    reader = _Reader(text, keep_partial)
    reader.i = start
    try:
        value, complete = reader.value()
    except _EOF as exc:
        raise JSONSyntaxError("text ended before a value", len(text)) from exc
    return LenientValue(value=value, end=reader.i, complete=complete, repairs=reader.repairs)

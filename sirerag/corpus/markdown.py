"""Splitting a Markdown file into sections at its headings (markdown-it-py's CommonMark parser).

Each section is the text under one heading, up to the next heading of any level, with its
heading path (``"Install > Linux"``) as provenance; the text before the first heading is a
section with an empty path. Headings inside code blocks, quotes or lists are text, as
CommonMark reads them. The heading lines themselves are left out of the text (the path
carries them), and sections with no text under their heading are left out (their heading
is in the path of the sections below it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_SLUG_DROP = re.compile(r"[^\w\s-]")
_SLUG_SPACE = re.compile(r"[\s_-]+")


@dataclass(frozen=True)
class Section:
    """A piece of a Markdown file: ``path`` (headings from the top, outermost first), ``slug`` (a
    stable key of the path, unique within the file; empty before the first heading) and ``text``."""

    path: tuple[str, ...]
    slug: str
    text: str

    @property
    def heading_path(self) -> str:
        return " > ".join(self.path)


def slugify(heading: str) -> str:
    """``"Install on Linux!"`` -> ``"install-on-linux"`` (letters, digits, hyphens; ``"section"`` if none)."""
    slug = _SLUG_SPACE.sub("-", _SLUG_DROP.sub("", heading.lower())).strip("-")
    return slug or "section"


def split_sections(source: str) -> list[Section]:
    """The sections of a Markdown text, in order (see the module docstring)."""
    from markdown_it import MarkdownIt

    lines = source.splitlines()
    tokens = MarkdownIt("commonmark").parse(source)
    headings: list[tuple[int, int, int, str]] = []  # (level, first line, line after, title)
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map:
            title = " ".join(tokens[i + 1].content.split()) if i + 1 < len(tokens) else ""
            headings.append((int(token.tag[1:]), token.map[0], token.map[1], title))
    sections: list[Section] = []
    seen: dict[str, int] = {}
    stack: list[tuple[int, str, str]] = []  # (level, title, slug) of the open headings
    start, slug = 0, ""
    path: tuple[str, ...] = ()
    for level, first, after, title in headings:
        _append(sections, path, slug, lines[start:first])
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title, slugify(title)))
        path = tuple(t for _, t, _ in stack)
        slug = "/".join(s for _, _, s in stack)
        seen[slug] = seen.get(slug, 0) + 1
        if seen[slug] > 1:
            slug = f"{slug}-{seen[slug]}"
        start = after
    _append(sections, path, slug, lines[start:])
    return sections


def _append(sections: list[Section], path: tuple[str, ...], slug: str, lines: list[str]) -> None:
    text = "\n".join(lines).strip()
    if text:
        sections.append(Section(path=path, slug=slug, text=text))

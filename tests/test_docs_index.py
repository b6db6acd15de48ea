"""The docs index lists every page under docs/, and every relative link of the README and the docs points to a
file that exists."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_docs_page_is_listed_in_the_index():
    listed = {(DOCS / target).resolve() for target in LINK.findall((DOCS / "index.md").read_text(encoding="utf-8"))}
    pages = {p.resolve() for p in DOCS.rglob("*.md") if p.name != "index.md" and "reproduce" not in p.parts}
    assert sorted(str(p.relative_to(DOCS)) for p in pages - listed) == []


def test_relative_links_point_to_files_that_exist():
    missing = []
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert missing == []

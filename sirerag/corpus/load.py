"""Loading a corpus into :class:`~sirerag.core.types.Document` records.

Three formats are accepted:

* a ``.jsonl`` file, one JSON object per line: ``{"id"?, "title"?, "text"}``
  (the format of ``shared/bench/*/corpus.jsonl``; BEIR's ``_id`` is read as ``id``);
* a ``.json`` file holding a list of such objects;
* a folder of ``.txt`` / ``.md`` files (searched recursively, sorted by relative path; hidden entries,
  symbolic links that lead outside the folder and files whose name is not UTF-8 text are skipped:
  :mod:`sirerag.corpus.folder`; empty files too, with a count in the log). A file is keyed and titled
  by its relative path
  (``beta/README.md``), so an edited file is an update of the same document and two
  ``README.md`` files stay two documents. A Markdown file is split at its headings
  (:mod:`sirerag.corpus.markdown`): each section is a document ``PATH#SLUG/PATH`` whose
  ``section`` is its heading path (the text before the first heading keeps the id ``PATH``). Every
  document of a folder records its file in ``source`` (:func:`sirerag.corpus.folder.folder_source`).

Ids are kept when given, otherwise derived with :func:`sirerag.core.types.document_id`
(the bench id scheme). Order is kept. Other fields are ignored (listed once in
the log). Control characters other than tab, newline and carriage return (NUL
included) and lone UTF-16 surrogates are removed from texts and titles (white-space
controls such as form feed become a space), with a count in the log; a text longer
than ``warn_passage_bytes`` gets a warning naming its file and line. Every problem
raises :class:`~sirerag.core.errors.InputError` naming the file and the line (``.jsonl``),
the row index (``.json``) or the file path (folders).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from sirerag.core.errors import InputError
from sirerag.core.io.files import json_type as _json_type
from sirerag.core.io.files import read_json, read_jsonl_numbered
from sirerag.corpus.folder import folder_source, scan_folder, shown_names
from sirerag.core.types import Document, collapse_ws, document_id

logger = logging.getLogger(__name__)

FIELDS = ("id", "title", "text", "section")
#: control characters that separate words: replaced by a space
_CONTROL_SPACE = re.compile(r"[\x0b\x0c\x1c-\x1f\x85]")
#: other control characters (NUL, escape, DEL, C1...) and lone surrogates: removed
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ud800-\udfff]")
#: at most this many large passages are named one by one in the log
_NAMED_LARGE = 5


@dataclass
class _Notes:
    """What the loader tells the log once, after reading every row."""

    ignored: set[str] = field(default_factory=set)
    controls: int = 0
    control_rows: int = 0
    control_first: str = ""
    control_last: str = ""
    large: int = 0


def strip_controls(text: str) -> tuple[str, int]:
    """``text`` without control characters other than tab, newline and carriage return,
    and without lone surrogates; white-space controls become a space. Returns the text
    and how many characters were changed."""
    text, spaced = _CONTROL_SPACE.subn(" ", text)
    text, removed = _CONTROL.subn("", text)
    return text, spaced + removed


#: what a terminal must not be handed besides controls: carriage return (it rewrites the line) and the bidi
#: embeddings, overrides, isolates and marks, which reorder what is shown (U+061C, U+200E-F, U+202A-E, U+2066-9)
_TERMINAL_ONLY = re.compile(r"[\r\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """``text`` safe to print to a terminal: :func:`strip_controls` (no escape sequences), and no carriage
    return or bidi control either; newline and tab stay."""
    return _TERMINAL_ONLY.sub("", strip_controls(text)[0])


def load_corpus(path: str | Path, *, warn_passage_bytes: int = 1_000_000,
                follow_outside_links: bool = False) -> list[Document]:
    """Read a corpus file or folder into documents, in corpus order.

    Args:
        path: a ``.jsonl`` file, a ``.json`` file (a list of objects) or a folder of
            ``.txt``/``.md`` files.
        warn_passage_bytes: log a warning naming the file and line of every text
            longer than this many UTF-8 bytes.
        follow_outside_links: in a folder, also read the files symbolic links lead to outside it
            (``corpus.follow_outside_links``).

    Returns:
        The documents; exact duplicates (same id, title and text) are kept once.
        Every text is a non-empty string without control characters other than tab,
        newline and carriage return; ids are unique non-empty strings.

    Raises:
        InputError: missing path, unsupported extension, non-UTF-8 bytes, invalid
            JSON, a row that is not an object or has no usable ``text``, a bad
            ``id``/``title``, one id used for two different documents, or an empty
            corpus. The message names the file and line, row index or file.
    """
    path = Path(path)
    if path.is_dir():
        rows: Iterable[tuple[str, Any, str]] = _folder_rows(path, follow_outside_links)
    elif not path.exists():
        raise InputError(f"corpus not found: {path}")
    elif path.suffix.lower() == ".jsonl":
        rows = ((f"{path}:{lineno}", obj, "") for lineno, obj in read_jsonl_numbered(path, keep_surrogates=True))
    elif path.suffix.lower() == ".json":
        rows = _json_rows(path)
    else:
        raise InputError(
            f"{path}: unsupported corpus format {path.suffix or '(no extension)'!r}; expected a .jsonl "
            f"file, a .json file (a list of objects) or a folder of .txt/.md files"
        )
    documents = _collect(rows, path, warn_passage_bytes)
    if not documents:
        raise InputError(f"{path}: empty corpus (no documents)")
    return documents


def load_documents(items: Iterable[Mapping[str, Any] | Document], *, where: str = "corpus",
                   warn_passage_bytes: int = 1_000_000) -> list[Document]:
    """Documents given in Python (``Index.build``/``add``): dicts ``{"id"?, "title"?, "text", "section"?}``
    or :class:`~sirerag.core.types.Document` records, checked and cleaned exactly as the rows of a
    ``.jsonl`` corpus (:func:`load_corpus`); a problem names ``where[i]``.

    Raises:
        TypeError: an item is neither a dict nor a Document.
        InputError: as :func:`load_corpus` (a bad field, a reused id, no documents).
    """
    rows: list[tuple[str, Any, str]] = []
    for i, item in enumerate(items):
        if not isinstance(item, (dict, Document)):
            raise TypeError(f"{where}[{i}] must be a dict with a 'text' field or a sirerag Document, "
                            f"got {'None' if item is None else type(item).__name__}")
        rows.append((f"{where}[{i}]", item.to_dict() if isinstance(item, Document) else item, ""))
    documents = _collect(rows, Path(where), warn_passage_bytes)
    if not documents:
        raise InputError(f"{where}: empty corpus (no documents)")
    return documents


def _json_rows(path: Path) -> Iterator[tuple[str, Any, str]]:
    data = read_json(path, keep_surrogates=True)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of objects with a 'text' field, "
                         f"got a JSON {_json_type(data)}")
    for i, obj in enumerate(data):
        yield f"{path}: row index {i}", obj, ""


def _folder_rows(folder: Path, follow_outside_links: bool) -> Iterator[tuple[str, Any, str]]:
    scan = scan_folder(folder, follow_outside_links=follow_outside_links)
    scan.report()
    if not scan.files:
        skipped = len(scan.hidden) + len(scan.outside) + len(scan.bad_names)
        raise InputError(f"{folder}: empty corpus: no .txt or .md files in this folder"
                         + (f" ({skipped} skipped: see the log)" if skipped else ""))
    empty: list[str] = []
    for rel in scan.files:
        file = folder / rel
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{file}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
        if not strip_controls(text)[0].strip():
            empty.append(rel)
            continue
        source = folder_source(folder, rel)
        if file.suffix.lower() != ".md":
            yield str(file), {"id": rel, "title": rel, "text": text.strip()}, source
            continue
        from sirerag.corpus.markdown import split_sections

        sections = split_sections(text)
        if not sections:  # headings only: one document of the headings, so the file is not lost
            yield str(file), {"id": rel, "title": rel, "text": text.strip()}, source
        for section in sections:
            yield (f"{file} ({section.heading_path})" if section.path else str(file),
                   {"id": f"{rel}#{section.slug}" if section.slug else rel, "title": rel,
                    "section": section.heading_path, "text": section.text}, source)
    if empty:
        logger.warning("%s: skipped %d empty file(s) (no text but white space): %s", folder, len(empty),
                       shown_names(empty))


def _collect(rows: Iterable[tuple[str, Any, str]], path: Path, warn_passage_bytes: int) -> list[Document]:
    documents: list[Document] = []
    first_seen: dict[str, tuple[str, Document]] = {}
    notes = _Notes()
    duplicates: list[tuple[str, str]] = []
    for where, obj, source in rows:
        doc = _document(where, obj, notes, source)
        _check_size(where, doc.text, warn_passage_bytes, notes)
        if doc.id in first_seen:
            where_first, first = first_seen[doc.id]
            if collapse_ws(first.text) != collapse_ws(doc.text) or collapse_ws(first.title) != collapse_ws(doc.title):
                raise InputError(f"{where}: id {doc.id!r} is already used by a different document "
                                 f"({where_first}); ids must be unique")
            duplicates.append((where, where_first))
            continue
        first_seen[doc.id] = (where, doc)
        documents.append(doc)
    if duplicates:
        where, where_first = duplicates[0]
        logger.warning("%s: dropped %d exact duplicate document(s), e.g. %s repeats %s",
                       path, len(duplicates), where, where_first)
    if notes.ignored:
        logger.info("%s: ignored field(s) %s (only %s are read)", path, sorted(notes.ignored), list(FIELDS))
    if notes.controls:
        logger.warning("%s: removed %d control character(s) from %d document(s), e.g. %s", path,
                       notes.controls, notes.control_rows, notes.control_first)
    if notes.large > _NAMED_LARGE:
        logger.warning("%s: %d passage(s) over %d bytes in all", path, notes.large, warn_passage_bytes)
    return documents


def _check_size(where: str, text: str, limit: int, notes: _Notes) -> None:
    if len(text) <= limit // 4 or len(text.encode("utf-8")) <= limit:  # a character is at most 4 bytes
        return
    notes.large += 1
    if notes.large <= _NAMED_LARGE:
        logger.warning("%s: passage of %d bytes is over %d (chunking.warn_passage_bytes); is this one "
                       "document?", where, len(text.encode("utf-8")), limit)


def _clean(where: str, text: str, notes: _Notes) -> str:
    cleaned, n = strip_controls(text)
    if n:
        notes.controls += n
        if notes.control_last != where:  # title and text of one row count once
            notes.control_rows += 1
            notes.control_first = notes.control_first or where
            notes.control_last = where
    return cleaned


def _document(where: str, obj: Any, notes: _Notes, source: str = "") -> Document:
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object with a 'text' field, got a JSON {_json_type(obj)}")
    if "text" not in obj:
        raise InputError(f"{where}: row has no 'text' field (fields: {sorted(obj)})")
    text = obj["text"]
    if not isinstance(text, str):
        raise InputError(f"{where}: 'text' must be a string, got a JSON {_json_type(text)}")
    text = _clean(where, text, notes)
    if not text.strip():
        raise InputError(f"{where}: 'text' is empty")
    title = obj.get("title")
    if title is None:
        title = ""
    elif not isinstance(title, str):
        raise InputError(f"{where}: 'title' must be a string, got a JSON {_json_type(title)}")
    title = _clean(where, title, notes)
    section = "" if obj.get("section") is None else obj["section"]
    if not isinstance(section, str):
        raise InputError(f"{where}: 'section' must be a string, got a JSON {_json_type(section)}")
    section = _clean(where, section, notes)
    key = "id" if "id" in obj else "_id" if "_id" in obj else None
    if key is None or obj[key] is None:
        doc_id = document_id(title, text)
    else:
        raw = obj[key]
        if isinstance(raw, bool) or not isinstance(raw, (str, int)) or not str(raw).strip() \
                or (isinstance(raw, str) and strip_controls(raw)[1]):
            raise InputError(f"{where}: '{key}' must be a non-empty string or an integer (without control "
                             f"characters), got {raw!r}")
        doc_id = str(raw)
    notes.ignored.update(k for k in obj if k not in FIELDS and k != key)
    return Document(id=doc_id, text=text, title=title, section=section, source=source)

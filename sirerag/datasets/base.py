"""What every converter shares: the collector of passages and questions, the drop
report, reading the release files with errors that name file and line, and the writer.

A converter reads a dataset's own files and hands paragraphs and questions to a
:class:`Collector`. Passages get the bench id (:func:`sirerag.core.types.document_id`,
title and text with white space collapsed) and are kept once, in order of first
appearance; questions point at their gold passages by that id. Anything left out
is counted under a reason (:attr:`Conversion.dropped`), so the report says what was
dropped and why.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from sirerag.core.errors import InputError
from sirerag.core.io.files import json_type, read_json, read_jsonl_numbered, write_jsonl
from sirerag.core.types import collapse_ws, document_id

logger = logging.getLogger(__name__)

CORPUS_FILE = "corpus.jsonl"
QUESTIONS_FILE = "questions.jsonl"


@dataclass(frozen=True)
class Conversion:
    """The result of a conversion: bench-format rows and what was left out.

    Attributes:
        format: the converter's name.
        corpus: ``{id, title, text}`` rows, de-duplicated, in order of first appearance.
        questions: ``{id, question, answers, gold_titles, gold_passage_ids, source, split, ...}`` rows.
        dropped: reason -> count of questions or paragraphs left out.
        merged: paragraphs seen more than once (same id) and kept once.
        notes: remarks for the user (e.g. that answers are empty).
    """

    format: str
    corpus: tuple[dict[str, str], ...]
    questions: tuple[dict[str, Any], ...]
    dropped: dict[str, int]
    merged: int = 0
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (without the rows)."""
        return {"format": self.format, "passages": len(self.corpus), "questions": len(self.questions),
                "dropped": dict(self.dropped), "duplicate_paragraphs_merged": self.merged, "notes": list(self.notes)}


@dataclass
class Collector:
    """Accumulates paragraphs and questions while a converter reads its input.

    Paragraphs come either from a corpus file (:meth:`corpus_passage`: always kept) or
    from a question's own context (:meth:`passage`, then :meth:`question` with the
    record's paragraph ids): the corpus is the corpus file's passages followed by the
    union of every kept question's paragraphs, de-duplicated, in order of first
    appearance (how ``shared/bench`` corpora are made).
    """

    format: str
    notes: list[str] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    _rows: dict[str, dict[str, str]] = field(default_factory=dict)
    _standalone: list[str] = field(default_factory=list)
    _standalone_ids: set[str] = field(default_factory=set)
    _questions: dict[str, dict[str, Any]] = field(default_factory=dict)
    _contexts: dict[str, list[str]] = field(default_factory=dict)

    def passage(self, title: str, text: str) -> str | None:
        """Register a paragraph; returns its bench id, or None (counted) when its text is empty."""
        title, text = collapse_ws(title), collapse_ws(text)
        if not text:
            self.drop("paragraph with empty text")
            return None
        pid = document_id(title, text)
        self._rows.setdefault(pid, {"id": pid, "title": title, "text": text})
        return pid

    def corpus_passage(self, title: str, text: str) -> str | None:
        """A paragraph of a corpus file: kept whether or not a question points at it."""
        pid = self.passage(title, text)
        if pid is not None:
            self._standalone.append(pid)
            self._standalone_ids.add(pid)
        return pid

    @property
    def corpus_ids(self) -> set[str]:
        """Ids of the corpus file's passages so far."""
        return self._standalone_ids

    @property
    def questions(self) -> list[dict[str, Any]]:
        """The question rows so far."""
        return list(self._questions.values())

    def row(self, pid: str) -> dict[str, str]:
        return self._rows[pid]

    def question(self, row: dict[str, Any], context: Sequence[str] = ()) -> bool:
        """Add a question row (its ``context`` paragraphs join the corpus); False (counted)
        when its id was seen before."""
        if row["id"] in self._questions:
            self.drop("duplicate question id")
            return False
        self._questions[row["id"]] = row
        self._contexts[row["id"]] = list(context)
        return True

    def drop(self, reason: str, n: int = 1) -> None:
        if n:
            self.dropped[reason] += n

    def result(self, ids: Sequence[str] | None = None) -> Conversion:
        """The conversion; with ``ids``, only those questions, in that order."""
        kept = list(self._questions)
        if ids is not None:
            wanted = list(dict.fromkeys(ids))
            missing = [i for i in wanted if i not in self._questions]
            if missing:
                logger.warning("%d id(s) from --ids are not in the input, e.g. %s", len(missing), missing[0])
            self.drop("question not in --ids", len(set(kept) - set(wanted)))
            self.drop("--ids entry not in the input (not a question)", len(missing))
            kept = [i for i in wanted if i in self._questions]
        order = self._standalone + [pid for qid in kept for pid in self._contexts[qid]]
        unique = list(dict.fromkeys(order))
        corpus = {pid: self._rows[pid] for pid in unique}
        questions = [self._questions[qid] for qid in kept]
        _check_gold(questions, corpus)
        return Conversion(format=self.format, corpus=tuple(corpus.values()), questions=tuple(questions),
                          dropped=dict(sorted(self.dropped.items())), merged=len(order) - len(unique),
                          notes=tuple(self.notes))


def _check_gold(questions: Sequence[dict[str, Any]], corpus: dict[str, Any]) -> None:
    """Every gold id must be a passage of the corpus (converters drop questions whose gold is missing
    before this; failing here is a converter bug)."""
    for q in questions:
        missing = [g for g in q["gold_passage_ids"] if g not in corpus]
        if missing:
            raise AssertionError(f"question {q['id']}: gold passage {missing[0]} is not in the corpus")


def records(path: Path) -> Iterator[tuple[str, Any]]:  # Any: parsed JSON values
    """``(where, record)`` for each record of a ``.json`` list or a ``.jsonl`` file.

    ``where`` is ``file:LINE`` for JSONL and ``file: record N`` (0-based) for a JSON list.
    """
    if path.suffix.lower() == ".jsonl":
        for lineno, obj in read_jsonl_numbered(path):
            yield f"{path}:{lineno}", obj
        return
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of records, got a JSON {json_type(data)}")
    for i, obj in enumerate(data):
        yield f"{path}: record {i}", obj


def field_of(where: str, obj: object, name: str, kind: type | tuple[type, ...], *,
             optional: bool = False) -> Any:  # Any: a JSON value of the kind checked
    """``obj[name]`` checked to be of ``kind``; the error names the place and the field."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object, got a JSON {json_type(obj)}")
    if name not in obj or obj[name] is None:
        if optional:
            return None
        raise InputError(f"{where}: missing field '{name}' (fields: {sorted(obj)})")
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _as_tuple(kind):
        names = "/".join(_KIND_NAMES.get(k, k.__name__) for k in _as_tuple(kind))
        raise InputError(f"{where}: field '{name}' must be a JSON {names}, got a JSON {json_type(value)}")
    return value


def sentences_context(where: str, obj: object) -> list[tuple[str, list[str]]]:
    """HotpotQA/2Wiki ``context``: a list of ``[title, [sentence, ...]]`` pairs, checked."""
    out = []
    for i, item in enumerate(field_of(where, obj, "context", list)):
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                or not isinstance(item[1], list) or not all(isinstance(s, str) for s in item[1])):
            raise InputError(f"{where}: context[{i}] must be [title, [sentence, ...]], got {_short(item)}")
        out.append((item[0], item[1]))
    return out


def supporting_titles(where: str, obj: object) -> list[str]:
    """Titles named by HotpotQA/2Wiki ``supporting_facts`` (``[[title, sentence index], ...]``), unique, in order."""
    titles: dict[str, None] = {}
    for i, item in enumerate(field_of(where, obj, "supporting_facts", list)):
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
            raise InputError(f"{where}: supporting_facts[{i}] must be [title, sentence index], got {_short(item)}")
        titles.setdefault(item[0], None)
    return list(titles)


def answers_of(where: str, obj: object, *alias_fields: str) -> list[str]:
    """``answer`` (a string or a list) followed by aliases from ``alias_fields``, without repeats."""
    answer = field_of(where, obj, "answer", (str, list, int, float))
    out = answer_strings(where, "answer", answer if isinstance(answer, list) else [answer])
    for name in alias_fields:
        out.extend(answer_strings(where, name, field_of(where, obj, name, list, optional=True) or []))
    return list(dict.fromkeys(out))


def answer_strings(where: str, name: str, values: Sequence[object]) -> list[str]:
    """Answers as strings: each item a string or a number; anything else (an object, null, a list) is
    refused with the place, the field and the item."""
    out = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InputError(f"{where}: field '{name}' must hold strings (or numbers), got a JSON "
                             f"{json_type(value)} at position {i}: {_short(value)}")
        out.append(str(value))
    return out


def write_conversion(conversion: Conversion, out: str | Path) -> tuple[Path, Path]:
    """Write ``corpus.jsonl`` and ``questions.jsonl`` into ``out`` (UTF-8, one JSON object per line,
    non-ASCII kept as is: the byte format of ``shared/bench``)."""
    out = Path(out)
    corpus, questions = out / CORPUS_FILE, out / QUESTIONS_FILE
    write_jsonl(corpus, conversion.corpus)
    write_jsonl(questions, conversion.questions)
    return corpus, questions


_KIND_NAMES = {str: "string", list: "array", dict: "object", int: "number", float: "number", bool: "boolean"}


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def question_row(collector: Collector, qid: str, question: str, answers: Sequence[str], gold: Sequence[str],
                 *, source: str, split: str, **extra: Any) -> dict[str, Any]:  # Any: JSON values
    """A ``shared/bench`` question row; ``gold_titles`` are the gold passages' (non-empty) titles, unique,
    in order."""
    gold = list(dict.fromkeys(gold))
    titles = list(dict.fromkeys(t for t in (collector.row(pid)["title"] for pid in gold) if t))
    row: dict[str, Any] = {"id": qid, "question": question, "answers": list(answers), "gold_titles": titles,
                           "gold_passage_ids": gold, "source": source, "split": split}
    row.update({k: v for k, v in extra.items() if v is not None})
    return row


def split_of(path: Path, split: str | None) -> str:
    """``split`` when given, else ``dev``/``train``/``test`` when the file name says so, else ``""``."""
    if split is not None:
        return split
    name = path.name.lower()
    for candidate in ("dev", "train", "test", "validation"):
        if candidate in name:
            return "dev" if candidate == "validation" else candidate
    return ""


def hops_of(qid: str) -> int | None:
    """MuSiQue's hop count from its id (``2hop__...``, ``3hop1__...``, ``4hop3__...``)."""
    head = qid.split("hop", 1)[0]
    return int(head) if head.isdigit() and "hop" in qid else None

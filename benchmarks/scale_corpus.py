"""A corpus of any size for the scale benchmarks: the real bench passages, then new passages
recombined from their sentences.

Example (from the repository root; the bench corpora are in ``../shared/bench``)::

    python -m benchmarks.scale_corpus --n 100000 --out /tmp/scale/corpus-100000.jsonl

Rows ``0 .. R-1`` are the R real passages of the source corpora, taken in turn from each (row 0 of
the first corpus, row 0 of the second, ..., row 1 of the first, ...), so any prefix mixes them.
Rows from R on are generated, each from one seeded draw:

- a *template* passage, drawn uniformly from the real ones, gives the new passage's target length
  in characters (so the lengths follow the real distribution) and its first sentence;
- a new *title entity* joins the first word(s) of one real title to the last word of another
  (``Keala`` + ``Partridge``), a name the real corpora do not have;
- further sentences, drawn uniformly from every real sentence, are added while the passage is
  shorter than its target (the last one is kept when that brings it closer to the target), then
  cut at the longest real passage;
- in every sentence the title of the passage it came from (without its ``(...)`` qualifier), and
  its last word as a name on its own, become the new title and its last word. So the new entity is
  mentioned as often as a real title entity is in its own sentences, and every other entity keeps
  its real name: a real entity's frequency grows in proportion to N, its share of the mentions
  (the real, Zipf-like distribution) stays as it was.

Nothing is held but the real passages' sentences: the rows are yielded one at a time and written
as they come.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from sirerag.text.chunking import sentence_spans

DEFAULT_SOURCES = tuple(f"../shared/bench/{name}/corpus.jsonl" for name in ("musique", "2wikimultihopqa", "hotpotqa"))
_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")


@dataclass(frozen=True)
class Source:
    """One real passage: its row, its title without qualifier, its sentences."""

    row: dict[str, str]
    name: str
    sentences: tuple[str, ...]


def _name(title: str) -> str:
    return _QUALIFIER.sub("", title).strip() or title.strip()


def read_sources(paths: Sequence[str | Path]) -> list[Source]:
    """The real passages of ``paths``, interleaved (one row of each file in turn)."""
    files = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            files.append([json.loads(line) for line in fh if line.strip()])
    out: list[Source] = []
    for i in range(max((len(f) for f in files), default=0)):
        for rows in files:
            if i < len(rows):
                row = {"id": str(rows[i]["id"]), "title": str(rows[i].get("title") or ""), "text": str(rows[i]["text"])}
                text = row["text"]
                sentences = tuple(s for s in (text[a:b].strip() for a, b in sentence_spans(text)) if s)
                out.append(Source(row, _name(row["title"]), sentences or (text.strip(),)))
    return out


def _substitute(sentence: str, old: str, new: str) -> str:
    """``old`` (a title) and its last word as a name on its own become ``new`` and its last word."""
    if not old:
        return sentence
    out = re.sub(rf"(?<!\w){re.escape(old)}(?!\w)", new, sentence)
    old_last, new_last = old.split()[-1], new.split()[-1]
    if len(old.split()) > 1 and len(old_last) > 3 and old_last[:1].isupper():
        out = re.sub(rf"(?<!\w){re.escape(old_last)}(?!\w)", new_last, out)
    return out


def _new_title(rng: random.Random, sources: Sequence[Source]) -> str:
    first = sources[rng.randrange(len(sources))].name.split()
    last = sources[rng.randrange(len(sources))].name.split()
    head = first[:-1] if len(first) > 1 else first
    return " ".join([*head, last[-1]])


def generate(n: int, sources: Sequence[Source], *, seed: int = 0) -> Iterator[dict[str, str]]:
    """``n`` rows (``id``, ``title``, ``text``): the real passages first (at most ``n``), then generated
    ones (ids ``g<seed>-<row>``). Lazily: nothing is kept between rows."""
    if not sources:
        raise ValueError("scale corpus: no source passages")
    for source in sources[:n]:
        yield dict(source.row)
    lengths = [len(s.row["text"]) for s in sources]
    longest = max(lengths)
    pool = [(i, j) for i, s in enumerate(sources) for j in range(len(s.sentences))]  # every real sentence
    for row in range(len(sources), n):
        rng = random.Random(f"{seed}:{row}")  # one stream per row: a row does not depend on the rows before it
        template = sources[rng.randrange(len(sources))]
        title = _new_title(rng, sources)
        target = len(template.row["text"])
        parts = [_substitute(template.sentences[0], template.name, title)]
        size = len(parts[0])
        while size < target:
            i, j = pool[rng.randrange(len(pool))]
            sentence = _substitute(sources[i].sentences[j], sources[i].name, title)
            if size + 1 + len(sentence) > target and (size + 1 + len(sentence)) - target > target - size:
                break
            parts.append(sentence)
            size += 1 + len(sentence)
        while len(parts) > 1 and size > longest:
            size -= 1 + len(parts.pop())
        yield {"id": f"g{seed}-{row:08d}", "title": title, "text": " ".join(parts)[:longest]}


def write_corpus(path: str | Path, n: int, sources: Sequence[Source], *, seed: int = 0) -> int:
    """Write :func:`generate`'s rows to ``path`` as JSON lines, one at a time; returns the rows written."""
    count = 0
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in generate(n, sources, seed=seed):
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(path)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, required=True, help="rows to write")
    parser.add_argument("--out", required=True, help="JSONL file to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", action="append", help="a real corpus.jsonl (repeat; default the three bench "
                        "corpora in ../shared/bench)")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    written = write_corpus(args.out, args.n, read_sources(args.source or DEFAULT_SOURCES), seed=args.seed)
    print(f"{args.out}: {written} passages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

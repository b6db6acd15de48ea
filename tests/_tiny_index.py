"""A three-document corpus and its leaves-only index, for tests of the public API, ``ask`` and the integrations
(seconds to build: MiniLM, no trees), and a two-hop chain among rivers for the PPR tests."""
from __future__ import annotations

import json
from pathlib import Path

ROWS = [
    {"id": "harwick", "title": "Harwick Bridge", "text": "The Harwick Bridge was designed by Margaret Lowe in 1901."},
    {"id": "elm", "title": "Elm river", "text": "The Elm river flows through Elmford into the North Sea."},
    {"id": "okavango", "title": "Okavango Delta", "text": "The Okavango Delta lies in Botswana, in Africa."},
]
QUESTION = "Who designed the Harwick Bridge?"

#: a two-hop chain (the hometown of Marta Kowalski, then its creek) among rivers, as (title, text)
CHAIN = [
    ("Marta Kowalski", "Marta Kowalski was born in Zielonka in 1952. Marta Kowalski became a painter of seascapes."),
    ("Zielonka", "Zielonka sits beside Biała Creek, a quiet waterway lined with willows."),
    ("Vistula", "The Vistula is the longest river in Poland and flows through Warsaw and Kraków."),
    ("Danube", "The Danube is a river that flows through Vienna, Budapest and Belgrade."),
    ("Jan Nowak", "Jan Nowak was born in Gdańsk. Jan Nowak wrote novels about the hometown of his mother."),
    ("Oder", "The Oder river flows through the city of Wrocław before reaching the Baltic Sea."),
]
CHAIN_QUESTION = "Which river flows through the hometown of Marta Kowalski?"


def write_corpus(path: Path, rows: list[dict] = ROWS) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


#: the bundled sample corpus (300 MuSiQue paragraphs)
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "corpus.jsonl"


def write_sample(path: Path, n: int) -> Path:
    """The first ``n`` passages of :data:`SAMPLE`, written to ``path`` as a ``.jsonl`` corpus."""
    with SAMPLE.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(n), handle)]
    return write_corpus(path, rows)


def build_tiny_index(root: Path) -> Path:
    """``root/index`` built from :data:`ROWS` with ``trees=[]``."""
    import sirerag

    sirerag.Index.build(write_corpus(root / "corpus.jsonl"), root / "index", trees=[]).close()
    return root / "index"

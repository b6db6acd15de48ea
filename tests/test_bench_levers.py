"""benchmarks/bench_levers.py: the texts of each kind an encoder is timed on, read from an index's files."""
from __future__ import annotations

import json

from benchmarks.bench_levers import texts_of


def test_aggregates_are_the_relatedness_trees_level_0_entries_in_file_order(tmp_path):
    rows = [{"id": "a1", "text": "Zielonka lies on the Biała. Marta Kowalski was born in Zielonka.", "kind": "aggregate",
             "tree": "relatedness", "level": 0},
            {"id": "l1", "text": "a leaf", "kind": "leaf", "tree": "similarity", "level": 0},
            {"id": "s1", "text": "a summary of aggregates", "kind": "summary", "tree": "relatedness", "level": 1},
            {"id": "a2", "text": "The Biała flows into the Vistula.", "kind": "aggregate", "tree": "relatedness",
             "level": 0}]
    (tmp_path / "entries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "propositions.jsonl").write_text(json.dumps({"text": "Zielonka  lies on the Biała."}) + "\n",
                                                 encoding="utf-8")

    texts = texts_of("unused.jsonl", 0, str(tmp_path), ["aggregates", "propositions"])

    assert texts == {"propositions": ["Zielonka lies on the Biała."],
                     "aggregates": [rows[0]["text"], rows[3]["text"]]}

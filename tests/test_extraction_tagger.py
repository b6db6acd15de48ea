"""The rule-based entity tagger: measured on hand-annotated benchmark sentences, plus unit cases.

``tests/data/tagger_gold.jsonl`` holds 74 sentences from shared/bench (MuSiQue, 2Wiki,
HotpotQA) with their entities annotated by hand (guideline in docs/relatedness.md).
``split="dev"`` sentences were in view while the rules were written; ``split="heldout"``
were annotated afterwards and scored blind once (P 0.84 / R 0.85) before the generic
fixes that followed, so they are no longer unseen. Current figures (title hint given):
all 0.937/0.949, held-out 0.933/0.925.

``tests/data/tagger_fresh.jsonl`` is the honest held-out set: 27 further sentences (9 per
corpus, drawn with a fixed seed from passages not in the first file), annotated by hand
with the same guideline without looking at the tagger's output, then scored once:
P 0.950 / R 0.932 with the title hint, 0.931 / 0.922 without (103 entities). Never tune
the tagger on it; if a change drops it below its floor, the change is what to look at.
The floors below sit a few points under the measured figures.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from sirerag.extraction.normalize import entity_key
from sirerag.extraction.offline import title_hint
from sirerag.extraction.tagger import EntityTagger, tag_entities

GOLD = Path(__file__).parent / "data" / "tagger_gold.jsonl"
FRESH = Path(__file__).parent / "data" / "tagger_fresh.jsonl"


def score(rows: list[dict], tagger: EntityTagger, *, hints: bool) -> tuple[float, float]:
    tp = fp = fn = 0
    for row in rows:
        pred = {entity_key(e) for e in tagger.tag(row["sentence"], hints=[title_hint(row["title"])] if hints else [])}
        gold = {entity_key(e) for e in row["entities"]}
        tp, fp, fn = tp + len(pred & gold), fp + len(pred - gold), fn + len(gold - pred)
    return tp / (tp + fp), tp / (tp + fn)


@pytest.fixture(scope="module")
def gold() -> list[dict]:
    rows = [json.loads(line) for line in GOLD.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 40 and {r["dataset"] for r in rows} == {"musique", "2wikimultihopqa", "hotpotqa"}
    return rows


def test_precision_recall_floor_on_benchmark_sentences(gold: list[dict]) -> None:
    tagger = EntityTagger()
    precision, recall = score(gold, tagger, hints=True)
    assert precision >= 0.91 and recall >= 0.92, (precision, recall)  # measured 0.937 / 0.949
    precision, recall = score(gold, tagger, hints=False)
    assert precision >= 0.90 and recall >= 0.91, (precision, recall)  # measured 0.922 / 0.940
    heldout = [r for r in gold if r["split"] == "heldout"]  # seen while fixing the rules: a regression floor
    precision, recall = score(heldout, tagger, hints=True)
    assert precision >= 0.90 and recall >= 0.89, (precision, recall)


def test_precision_recall_floor_on_fresh_sentences() -> None:
    rows = [json.loads(line) for line in FRESH.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) == 27 and {r["split"] for r in rows} == {"fresh"}
    gold_ids = {json.loads(line)["passage_id"] for line in GOLD.read_text(encoding="utf-8").splitlines() if line}
    assert gold_ids.isdisjoint(r["passage_id"] for r in rows)
    tagger = EntityTagger()
    precision, recall = score(rows, tagger, hints=True)
    assert precision >= 0.92 and recall >= 0.90, (precision, recall)  # measured 0.950 / 0.932
    precision, recall = score(rows, tagger, hints=False)
    assert precision >= 0.90 and recall >= 0.89, (precision, recall)  # measured 0.931 / 0.922


@pytest.mark.parametrize("sentence", [
    "However, the film was a success.",
    "Therefore, there is no reason.",
    "During the war many left.",
    "It was released later.",
    "Born in a small town, the writer moved often.",
    "Although popular, the show ended.",
    "He said nothing.",
])
def test_common_sentence_initial_words_are_not_entities(sentence: str) -> None:
    assert tag_entities(sentence) == ()


def test_kinds_of_entities() -> None:
    got = tag_entities('The song ``This Is Me \'\'from the film, sung by Keala Settle on November 5, 1975, '
                       'cost $580,000 and ran 4.5 km in 2011–12 at the University of Botswana.')
    assert got == ("This Is Me", "Keala Settle", "November 5, 1975", "$580,000", "4.5 km", "2011-12",
                   "University of Botswana")


def test_connectors_only_between_names() -> None:
    assert tag_entities("Henry VII of England met the Duke of the Asturias.") == ("Henry VII of England",
                                                                                 "Duke of the Asturias")
    assert tag_entities("Varkala in Thiruvananthapuram district") == ("Varkala", "Thiruvananthapuram")
    assert tag_entities("Sonnet 110 is by William Shakespeare.") == ("Sonnet 110", "William Shakespeare")


def test_year_ranges_and_event_years() -> None:
    assert tag_entities("Anthony Robinson (1762–1827) was a minister.") == ("Anthony Robinson", "1762", "1827")
    assert tag_entities("He competed at the 1988 Summer Olympics.") == ("1988 Summer Olympics",)
    assert tag_entities("In 1975 Dziga Vertov moved.") == ("1975", "Dziga Vertov")


def test_possessive_is_stripped_and_splits_names() -> None:
    assert tag_entities("He stood in Istanbul's Taksim Square.") == ("Istanbul", "Taksim Square")
    assert tag_entities("Presley's return was welcomed.") == ("Presley",)


def test_hint_wins_over_the_spans_it_covers_only() -> None:
    sentence = "The Great Adventure is a film about the Vàm Cỏ River."
    assert tag_entities(sentence) == ("Great Adventure", "Vàm Cỏ River")
    assert tag_entities(sentence, hints=["The Great Adventure", "Vàm Cỏ"]) == ("The Great Adventure",
                                                                                "Vàm Cỏ River")


def test_fit_learns_common_words_from_the_corpus() -> None:
    sentence = "Settlers arrived in Ohio."
    assert tag_entities(sentence) == ("Settlers", "Ohio")
    tagger = EntityTagger().fit(["Many settlers came.", "The settlers left.", "Early settlers farmed.",
                                 "Other settlers stayed."])
    assert tagger.tag(sentence) == ("Ohio",)

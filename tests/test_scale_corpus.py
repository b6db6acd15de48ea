"""The scale corpus generator (benchmarks/scale_corpus.py) on the repository's 300-passage sample:
deterministic for a seed, real passages first, generated lengths within the real range, unique ids,
new titles substituted for the source titles, and rows made lazily (one at a time)."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from benchmarks import scale_corpus

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "corpus.jsonl"


@pytest.fixture(scope="module")
def sources():
    return scale_corpus.read_sources([SAMPLE])


def test_same_seed_same_rows_other_seed_other_rows(sources):
    first = list(scale_corpus.generate(700, sources, seed=3))
    assert first == list(scale_corpus.generate(700, sources, seed=3))
    other = list(scale_corpus.generate(700, sources, seed=4))
    assert first[:300] == other[:300]  # the real passages do not depend on the seed
    assert first[300:] != other[300:]


def test_real_passages_come_first_in_their_order(sources):
    real = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    rows = list(scale_corpus.generate(400, sources, seed=0))
    assert [r["id"] for r in rows[:300]] == [r["id"] for r in real]
    assert [r["text"] for r in rows[:300]] == [r["text"] for r in real]
    assert all(r["id"].startswith("g0-") for r in rows[300:])
    assert len(list(scale_corpus.generate(10, sources))) == 10  # fewer rows than real passages: a prefix


def test_interleaves_several_sources(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({"id": f"a{i}", "title": "T", "text": "One. Two."}) + "\n" for i in range(3)))
    b.write_text(json.dumps({"id": "b0", "title": "U", "text": "Three."}) + "\n")
    rows = list(scale_corpus.generate(4, scale_corpus.read_sources([a, b])))
    assert [r["id"] for r in rows] == ["a0", "b0", "a1", "a2"]


def test_generated_lengths_within_the_real_range_and_ids_unique(sources):
    real = [len(s.row["text"]) for s in sources]
    rows = list(scale_corpus.generate(2000, sources, seed=1))
    generated = [len(r["text"]) for r in rows[300:]]
    assert max(generated) <= max(real)
    assert min(generated) >= min(len(s.sentences[0]) for s in sources) > 0
    assert len({r["id"] for r in rows}) == len(rows)
    # lengths follow the real distribution: the medians are close (templates are drawn uniformly)
    median = sorted(generated)[len(generated) // 2]
    assert abs(median - sorted(real)[len(real) // 2]) < 0.25 * sorted(real)[len(real) // 2]


def test_source_titles_become_the_new_title(sources):
    settle = scale_corpus.Source({"id": "x", "title": "Keala Settle", "text": "t"}, "Keala Settle", ("t",))
    sentence = "Keala Joan Settle (born 1975) is a singer. Settle sang, and Keala Settle won."
    assert scale_corpus._substitute(sentence, settle.name, "Ann Brook") == \
        "Keala Joan Brook (born 1975) is a singer. Brook sang, and Ann Brook won."
    assert scale_corpus._name("Anthony Robinson (Unitarian)") == "Anthony Robinson"
    rows = list(scale_corpus.generate(600, sources, seed=2))[300:]
    titled = [r for r in rows if r["title"] in r["text"]]
    assert len(titled) > len(rows) // 2  # most passages name their (new) title entity
    real_titles = {s.name for s in sources}
    assert sum(r["title"] in real_titles for r in rows) < len(rows) // 10


def test_rows_are_made_one_at_a_time(sources, tmp_path):
    # a row depends on the seed and its position only, so a prefix of a billion rows is the same rows
    huge = scale_corpus.generate(10**9, sources, seed=5)
    assert not isinstance(huge, list)
    assert list(itertools.islice(huge, 320)) == list(scale_corpus.generate(320, sources, seed=5))
    out = tmp_path / "c.jsonl"
    assert scale_corpus.write_corpus(out, 320, sources, seed=5) == 320
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == \
        list(scale_corpus.generate(320, sources, seed=5))


def test_no_sources_is_an_error():
    with pytest.raises(ValueError, match="no source passages"):
        next(scale_corpus.generate(5, []))

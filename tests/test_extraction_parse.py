"""Reading facts out of model output: real SmolLM2 outputs and generated malformations."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from sirerag.extraction.coref import drift_reason
from sirerag.extraction.lenient_json import loads_lenient
from sirerag.extraction.llm import clean_facts
from sirerag.extraction.parse import ParseError, facts_to_json, parse_facts

FIXTURE = Path(__file__).parent / "data" / "smollm2_extraction_outputs.jsonl"

VALID = {
    "f1": {"fact": "Keala Settle was born on November 5, 1975.", "entities": ["Keala Settle", "November 5, 1975"]},
    "f2": {"fact": "Keala Settle's song won the Golden Globe Award.", "entities": ["Keala Settle", "Golden Globe Award"]},
    "f3": {"fact": "The weather was mild.", "entities": []},
}


def texts(parsed) -> list[str]:  # noqa: ANN001
    return [f.text for f in parsed.facts]


def test_valid_json_in_every_accepted_shape() -> None:
    dict_form = json.dumps(VALID)
    list_form = json.dumps(list(VALID.values()))
    wrapped = json.dumps({"facts": list(VALID.values())})
    for output in (dict_form, list_form, wrapped):
        parsed = parse_facts(output)
        assert texts(parsed) == [v["fact"] for v in VALID.values()]
        assert parsed.facts[0].entities == ("Keala Settle", "November 5, 1975")
        assert parsed.facts[2].entities == ()
        assert not parsed.truncated and parsed.repairs == ()


@pytest.mark.parametrize("output, repair", [
    ("```json\n" + json.dumps(VALID, indent=2) + "\n```", "code_fence"),
    ("Here are the facts:\n" + json.dumps(VALID) + "\nI hope this helps!", "prose"),
    (json.dumps(VALID, indent=1).replace('"]\n', '"],\n').replace("}\n}", "},\n}"), "trailing_comma"),
    (json.dumps(VALID).replace('"', "'"), "single_quotes"),
    (json.dumps(VALID).replace('"fact"', "fact").replace('"entities"', "entities"), "unquoted_key"),
    (json.dumps(VALID).replace('}, "f2"', '} "f2"'), "missing_comma"),
])
def test_repairs(output: str, repair: str) -> None:
    parsed = parse_facts(output)
    assert texts(parsed) == [v["fact"] for v in VALID.values()]
    assert repair in parsed.repairs


def test_apostrophes_inside_single_quoted_strings() -> None:
    parsed = parse_facts("{'f1': {'fact': 'Shakespeare's sonnets were printed in 1609.', "
                         "'entities': ['William Shakespeare', '1609']}}")
    assert texts(parsed) == ["Shakespeare's sonnets were printed in 1609."]


def test_unescaped_inner_quotes() -> None:
    parsed = parse_facts('{"f1": {"fact": "The film "A Beautiful Mind" won an award.", "entities": ["A Beautiful Mind"]}}')
    assert texts(parsed) == ['The film "A Beautiful Mind" won an award.']


def test_truncated_output_keeps_only_complete_facts() -> None:
    full = json.dumps(VALID)
    cut = full[:full.index("Golden Globe")]
    parsed = parse_facts("```json\n" + cut)
    assert parsed.truncated
    assert texts(parsed) == [VALID["f1"]["fact"]]
    with pytest.raises(ParseError, match="cut off"):
        parse_facts(full[:30])


def test_entities_are_normalised_and_filtered() -> None:
    parsed = parse_facts(json.dumps({"f1": {"fact": "Paris is big.", "entities": [" Paris. ", "it", "PARIS", "", 1889]}}))
    assert parsed.facts[0].entities == ("Paris", "1889")
    parsed = parse_facts(json.dumps({"f1": {"fact": "Paris is big.", "entities": "Paris, France"}}))
    assert parsed.facts[0].entities == ("Paris", "France")


@pytest.mark.parametrize("output, reason", [
    ("", "empty"),
    ("I cannot help with that.", "no JSON"),
    ('{"name": "x", "value": 3}', "no facts"),
    ('{"f1": {"fact": "", "entities": ["A"]}}', "without fact text"),
])
def test_unusable_outputs_raise_parse_error_with_reason(output: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        parse_facts(output)


def test_canonical_answer_round_trips() -> None:
    parsed = parse_facts(json.dumps(VALID))
    again = parse_facts(facts_to_json(parsed.facts))
    assert again.facts == parsed.facts and again.repairs == ()


def test_explicitly_empty_answer_is_zero_facts() -> None:
    assert parse_facts("```json\n{}\n```").facts == ()


def test_lenient_reader_matches_json_on_valid_input() -> None:
    rng = random.Random(0)
    for _ in range(200):
        value = {f"k{i}": rng.choice([rng.random(), rng.randint(-5, 5), "a\"b\\c\u00e9", None, True, [1, "x"],
                                      {"n": [False]}]) for i in range(rng.randint(0, 5))}
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
        got = loads_lenient(text)
        assert got.value == value and got.complete and not got.repairs


def _skeleton(text: str) -> str:
    """The letters and digits of a text, in order."""
    return "".join(ch for ch in text if ch.isalnum())


def _decoded(text: str) -> str:
    """``text`` with JSON escapes resolved the way a lenient reader may resolve them."""
    text = re.sub(r"\\u[0-9a-fA-F]{4}|\\[bfnrt]", " ", text)
    return re.sub(r"\\(.)", r"\1", text)


def test_every_prefix_and_random_damage_yield_only_text_of_the_answer() -> None:
    """A cut-off answer yields a subset of its true facts, or a ParseError.

    Random damage (characters replaced or deleted anywhere) can legitimately change a fact's
    text, or turn an entity list into facts when the keys are broken, so the promise there is
    weaker but still exact: every fact and entity returned is text the damaged answer holds
    (its letters and digits occur, in order and contiguous, in the output); the parser never
    invents text; and nothing but a ParseError is ever raised.
    """
    full = "```json\n" + json.dumps(VALID, indent=2) + "\n```"
    truth = {v["fact"] for v in VALID.values()}
    for end in range(len(full) + 1):
        try:
            got = set(texts(parse_facts(full[:end])))
        except ParseError:
            continue
        assert got <= truth, (end, got)
    rng = random.Random(1)
    parsed = 0
    for _ in range(500):
        chars = list(full)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(chars))
            chars[pos] = rng.choice(['"', "'", "{", "}", "[", "]", ",", ":", "\\", "x", ""])
        damaged = "".join(chars)
        try:
            facts = parse_facts(damaged).facts
        except ParseError:
            continue
        parsed += 1
        held = _skeleton(_decoded(damaged))
        for fact in facts:
            for text in (fact.text, *fact.entities):
                assert _skeleton(text) in held, (damaged, text)
    assert parsed > 400  # most damage is repaired (measured: 495 of 500)


def _fixture_rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_real_smollm2_outputs() -> None:
    """Each real output parses to what was recorded by hand after reading it: the number of
    distinct facts, whether it was cut off, how many survive cleaning (echoes of the prompt's
    example and facts not in the paragraph are dropped), or the expected failure."""
    rows = [r for r in _fixture_rows() if r["prompt"].startswith("extract_propositions")]
    assert len(rows) >= 10 and len({r["passage_id"] for r in rows}) >= 10
    for row in rows:
        expect = row["expect"]
        if expect["parses"]:
            parsed = parse_facts(row["output"])
            assert len(parsed.facts) == expect["facts"], row["passage_id"]
            assert parsed.truncated == expect["truncated"], row["passage_id"]
            kept, _, _ = clean_facts(parsed.facts, row["paragraph"])
            assert len(kept) == expect["kept"], row["passage_id"]
            assert all(e.casefold() != "she" for f in kept for e in f.entities)
        else:
            with pytest.raises(ParseError, match="no JSON object or array in the output"):
                parse_facts(row["output"])


def test_real_smollm2_rewrites_and_the_drift_guard() -> None:
    """A rewrite that drops half the paragraph and invents roles is refused; one that copies
    the paragraph unchanged is harmless and accepted."""
    rows = [r for r in _fixture_rows() if r["prompt"].startswith("coref_rewrite")]
    assert {r["expect"]["drift"] for r in rows} == {True, False}
    for row in rows:
        assert (drift_reason(row["paragraph"], row["output"]) is not None) == row["expect"]["drift"], row["passage_id"]

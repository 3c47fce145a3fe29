"""Errors of one type planted in faithful sentences (issue 64.2): each rule makes its error."""

from __future__ import annotations

import random

from conli.training.error_types import (
    TYPES,
    antonym,
    as_records,
    plant,
    reverse_roles,
    swap_numbers,
)
from conli.training.example import Example

SOURCE = ("The council voted for the plan on Monday. It has 12 members, and 7 of them "
          "backed the bridge, which opened in 1998. Piet Holt and his sister Anna Holt founded "
          "the bakery in Delft.")


def test_antonym_turns_one_word_into_its_opposite() -> None:
    rng = random.Random(0)
    assert antonym("The council voted for the plan.", rng) == "The council voted against the plan."
    assert antonym("Exports increased last year.", rng) == "Exports decreased last year."
    assert antonym("It is neither male nor female.", rng) is None  # both already there
    assert antonym("Nothing here flips.", rng) is None


def test_swapped_numbers_are_both_stated_by_the_source() -> None:
    swapped = swap_numbers("It has 12 members, and 7 of them backed it.", SOURCE)
    assert swapped == "It has 7 members, and 12 of them backed it."
    assert swap_numbers("It has 12 members and 40 staff.", SOURCE) is None  # 40 is not stated


def test_reversed_roles_swap_two_names_of_one_kind_with_words_between() -> None:
    people = [("Piet Holt", "PERSON"), ("Anna Holt", "PERSON")]
    assert reverse_roles("Piet Holt hired Anna Holt last year.", people) == \
        "Anna Holt hired Piet Holt last year."
    assert reverse_roles("Piet Holt, Anna Holt and others came.", people) is None  # a list


class _NoEntities:
    """A stand-in NER pipeline that finds nothing (what the rules need without names)."""

    def __call__(self, text: str) -> _NoEntities:
        return self

    ents: tuple[()] = ()


def test_each_planted_error_differs_from_its_sentence_and_numbers_are_unstated() -> None:
    rng = random.Random(1)
    sentence = "The council voted for the plan, which had 12 members, on Monday in 1998."
    for kind in ("number", "negation", "antonym", "addition", "date"):
        variant = plant(kind, sentence, SOURCE, _NoEntities(), rng)
        assert variant is not None and variant != sentence, kind
    number = plant("number", sentence, SOURCE, _NoEntities(), random.Random(2))
    assert number is not None and "12" not in number  # the new value is not the source's
    assert set(TYPES) >= {"number", "name", "date", "negation", "antonym", "reversed_role",
                          "swapped_numbers", "addition"}


def test_records_pair_each_error_with_its_faithful_control() -> None:
    from conli.training.error_types import Planted

    example = Example(id="x:1", source=SOURCE, response="r", label=False, dataset="x")
    rows = as_records([Planted(example, "It has 12 members.", "It has 7 members.", "number")])
    assert [(r["response"], r["label"]) for r in rows] == [
        ("It has 7 members.", True), ("It has 12 members.", False)]
    assert rows[1]["id"] == rows[0]["id"] + ":control"

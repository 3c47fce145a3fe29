"""Which entities the source states word for word (the entity re-check's gate)."""

import pytest

from conli.ner.grounding import SourceMentions

SOURCE = "Hamza Ahmed's  bus left MINNEAPOLIS for New\nYork on 14 June; it cost \u201c$12\u201d."


@pytest.mark.parametrize(
    ("entity", "expected"),
    [
        ("Minneapolis", True),  # case-folded
        ("New York", True),  # whitespace runs are one space
        ("Hamza Ahmed's", True),  # possessive on either side
        ("Hamza Ahmed", True),
        ("14 June", True),
        ('"$12"', True),  # curly quotes in the source match straight ones
        ("Ahmed", True),
        ("York", True),
        ("Ham", False),  # whole words only
        ("4 June", False),
        ("15 June", False),
        ("Istanbul", False),
        ("", False),
    ],
)
def test_mentions(entity, expected):
    assert SourceMentions(SOURCE).mentions(entity) is expected

"""printable(): control characters from a response or a model's reason are shown, not obeyed."""

from __future__ import annotations

import pytest

from conli.cli.display import printable


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[2J\x1b[31mred\x1b[0m", "\\x1b[2J\\x1b[31mred\\x1b[0m"),  # ESC sequences
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC ended by BEL
        ("ding\x07", "ding\\x07"),  # BEL
        ("safe\rEVIL", "safe\\x0dEVIL"),  # CR would overwrite the line
        ("\x00\x08\x0b\x0c\x7f", "\\x00\\x08\\x0b\\x0c\\x7f"),  # NUL, BS, VT, FF, DEL
        ("\x9b31m", "\\x9b31m"),  # a C1 control (CSI)
        ("\x80\x9f", "\\x80\\x9f"),  # both ends of C1
        ("abc\u202edcba", "abc\\u202edcba"),  # bidi override
        ("\u202a\u202b\u202c\u202d", "\\u202a\\u202b\\u202c\\u202d"),  # embeddings, pop
        ("\u2066x\u2067y\u2068z\u2069", "\\u2066x\\u2067y\\u2068z\\u2069"),  # isolates
    ],
)
def test_printable_makes_controls_visible(text: str, shown: str) -> None:
    assert printable(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The library opened in 1962.\nThe council runs it.\n",
        "name\tvalue\n",
        "Café, naïve, Straße, Ελληνικά, 日本語, עברית, emoji 🎉, € £ ¥",
        "\xa0non-breaking space and \u00a9 (just past C1)",
        "a literal backslash-x: \\x1b stays as typed",
    ],
)
def test_printable_leaves_other_text_unchanged(text: str) -> None:
    assert printable(text) == text

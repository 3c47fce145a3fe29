"""Token counts guessed from characters, where no tokenizer is at hand: one place, three uses.

English prose runs about 4 characters a token with Qwen and GPT tokenizers; digits and rare
words take more tokens. Each guess leans the safe way for its use: a window must not
overflow (assume many tokens), a refusal must be certain (assume few), a rate-limit
reservation should be about right.
"""

from __future__ import annotations

CHARS_PER_TOKEN_FLOOR = 3.0  # few characters a token: the most tokens a text plausibly takes
CHARS_PER_TOKEN_TYPICAL = 4.0  # English prose
CHARS_PER_TOKEN_CEILING = 4.5  # many characters a token: the fewest tokens it can take


def at_most_tokens(chars: int) -> int:
    """A generous guess of the tokens ``chars`` characters take (for sizing windows)."""
    return int(chars / CHARS_PER_TOKEN_FLOOR) + 1


def typical_tokens(chars: int) -> int:
    """The usual tokens ``chars`` characters take (for rate-limit reservations)."""
    return int(chars / CHARS_PER_TOKEN_TYPICAL)


def at_least_tokens(chars: int) -> int:
    """Tokens ``chars`` characters take at the least (to refuse only what cannot fit)."""
    return int(chars / CHARS_PER_TOKEN_CEILING)

"""Numbers and dates as values, so a source and a response that write them apart still match.

"2.4 million" and "2,400,000", "four" and "4", "June 14" and "14 June" name one value each;
an entity the source never states is decided on values, not spellings
(``grounding.SourceMentions.states``). Integers written plainly must match exactly (a year
1913 is not 1931, nor 1910); a number written with a scale word or a decimal fraction
("2.4 million", "3.5") matches a source value it rounds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

_UNITS = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen"
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_ORDINALS = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
    "tenth", "eleventh", "twelfth"
]
WORD_NUMBERS: dict[str, int] = {
    **{w: i for i, w in enumerate(_UNITS)},
    **{w: 20 + 10 * i for i, w in enumerate(_TENS)},
    **{w: i + 1 for i, w in enumerate(_ORDINALS)},
    "a dozen": 12, "dozen": 12,
}
SCALES: dict[str, int] = {
    "hundred": 100, "thousand": 1_000, "k": 1_000, "million": 1_000_000, "mn": 1_000_000,
    "billion": 1_000_000_000, "bn": 1_000_000_000, "trillion": 1_000_000_000_000,
    "tn": 1_000_000_000_000,  # not "m" or "b": "840 m" is metres far more often
    # the scale words of the other languages conli reads, and their abbreviations
    "millions": 1_000_000, "millionen": 1_000_000, "mio": 1_000_000, "millones": 1_000_000,
    "milioni": 1_000_000, "milhões": 1_000_000, "miljoen": 1_000_000, "млн": 1_000_000,
    "milliards": 1_000_000_000, "milliarden": 1_000_000_000, "mrd": 1_000_000_000,
    "миллионов": 1_000_000, "万": 10_000, "亿": 100_000_000,
}
MONTHS: dict[str, int] = {}
for _number, _name in enumerate([
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december"
], start=1):
    MONTHS[_name] = _number
    MONTHS[_name[:3]] = _number
MONTHS["sept"] = 9

_WORDS = "|".join(sorted((re.escape(w) for w in WORD_NUMBERS), key=len, reverse=True))
_COMPOUND = rf"(?:{'|'.join(_TENS)})[- ](?:{'|'.join(_UNITS[1:10])})"
_SCALE = "|".join(sorted((re.escape(s) for s in SCALES), key=len, reverse=True))
_MONTH = "|".join(sorted((re.escape(m) for m in MONTHS), key=len, reverse=True))
# "2.400.000" and "2,4" (German, French, ...) before "2,400,000", "2.4" and ".5"
_POINT_THOUSANDS = r"\d{1,3}(?:\.\d{3}){2,}(?:,\d+)?"
_COMMA_DECIMAL = r"\d+,\d{1,2}(?!\d)"
_DIGITS = (rf"{_POINT_THOUSANDS}|{_COMMA_DECIMAL}|\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|"
           r"\d+(?:\.\d+)?|\.\d+")
# Chinese and Japanese write no space between a number and its words ("于2019年"): only a
# letter of another script, a digit or a point before a number joins it to a word
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
NOT_AFTER_WORD = rf"(?<![^\W{_CJK}])"
NOT_BEFORE_WORD = rf"(?![^\W{_CJK}])"
NUMBER = re.compile(
    rf"{NOT_AFTER_WORD}(?<!\.)(?P<num>{_DIGITS}|{_COMPOUND}|{_WORDS})(?:st|nd|rd|th)?"
    rf"(?:\s*(?P<scale>{_SCALE})(?![^\W\d_{_CJK}]))?",
    re.IGNORECASE,
)
DAY_MONTH = re.compile(
    rf"{NOT_AFTER_WORD}(?P<day>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<month>{_MONTH})\.?"
    r"(?!\w)", re.IGNORECASE)
MONTH_DAY = re.compile(
    rf"(?<!\w)(?P<month>{_MONTH})\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?(?!\d)",
    re.IGNORECASE)
MONTH = re.compile(rf"(?<!\w)(?P<month>{_MONTH})\.?(?!\w)", re.IGNORECASE)


@dataclass(frozen=True)
class Value:
    """One number as written: its value, and how far off a source value may be to match."""

    amount: Decimal
    tolerance: Decimal  # half a unit of its last written digit; 0: must match exactly

    def matches(self, other: Decimal) -> bool:
        """True when ``other`` is this value, or rounds to it as it was written."""
        return abs(other - self.amount) <= self.tolerance


@dataclass(frozen=True)
class Values:
    """The numbers, months and day-month dates a text states."""

    numbers: tuple[Value, ...] = ()
    months: frozenset[int] = frozenset()
    dates: frozenset[tuple[int, int]] = frozenset()  # (month, day)

    def __bool__(self) -> bool:
        return bool(self.numbers or self.months or self.dates)


def values_of(text: str) -> Values:
    """Every number, month and day-month date ``text`` states (days are not counted twice)."""
    dates: set[tuple[int, int]] = set()
    spans: list[tuple[int, int]] = []
    for pattern in (MONTH_DAY, DAY_MONTH):
        for found in pattern.finditer(text):
            day = int(found["day"])
            if 1 <= day <= 31:
                dates.add((MONTHS[found["month"].lower()], day))
                spans.append(found.span("day"))
    months = {MONTHS[m["month"].lower()] for m in MONTH.finditer(text)  # "may", "mar": verbs
              if m["month"][0].isupper() or len(m["month"]) > 3}
    numbers = [value for found in NUMBER.finditer(text)
               if not any(s <= found.start() < e for s, e in spans)
               and (value := _value(found)) is not None]
    return Values(tuple(numbers), frozenset(months), frozenset(dates))


def states(source: Values, claimed: Values) -> bool:
    """True when every number, month and date ``claimed`` holds is among ``source``'s.

    A month on its own matches a source month or a source date in that month.
    """
    amounts = [v.amount for v in source.numbers]
    source_months = source.months | {month for month, _ in source.dates}
    return (all(any(v.matches(a) for a in amounts) for v in claimed.numbers)
            and claimed.months <= source_months and claimed.dates <= source.dates)


def _value(found: re.Match[str]) -> Value | None:
    """The matched number as a ``Value`` (None if it does not parse)."""
    raw = _plain_digits(found["num"].lower())
    scale = SCALES.get((found["scale"] or "").lower(), 1)
    if raw in WORD_NUMBERS:
        amount, places = Decimal(WORD_NUMBERS[raw]), 0
    elif re.fullmatch(_COMPOUND, raw):
        tens, unit = re.split(r"[- ]", raw)
        amount, places = Decimal(WORD_NUMBERS[tens] + WORD_NUMBERS[unit]), 0
    else:
        try:
            amount = Decimal(raw)
        except InvalidOperation:
            return None
        places = len(raw.partition(".")[2])
    approximate = scale >= 1_000 or places > 0  # "three hundred" is exact
    tolerance = Decimal(scale) * Decimal(5) / Decimal(10) ** (places + 1) if approximate \
        else Decimal(0)
    return Value(amount * scale, tolerance)


def _plain_digits(number: str) -> str:
    """A number as Python reads it: "2.400.000" -> "2400000", "2,4" -> "2.4", "2,400" -> "2400"."""
    if re.fullmatch(_POINT_THOUSANDS, number):
        return number.replace(".", "").replace(",", ".")
    if re.fullmatch(_COMMA_DECIMAL, number):
        return number.replace(",", ".")
    return number.replace(",", "")


def value_spans(text: str) -> list[tuple[int, int, str]]:
    """The dates and the numbers written with digits in ``text``: (start, end, category).

    What is compared with the source in a sentence no NER reads (any language): a digit
    means the same in every script, and so does a date the patterns read.
    """
    found = [(m.start(), m.end(), "DateTime") for pattern in (MONTH_DAY, DAY_MONTH)
             for m in pattern.finditer(text)]
    found += [(m.start(), m.end(), "Quantity") for m in NUMBER.finditer(text)
              if any(c.isdigit() for c in m["num"])
              and not any(s <= m.start() < e for s, e, _ in found)]
    return sorted(found)

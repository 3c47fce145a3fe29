"""Whether a source states a name, through the short forms people write it in.

"The United States Soccer Federation" is stated by a source that says "US Soccer": names
are compared after their usual short forms are read as one (US, U.S., USA, United States;
UK, U.K., Britain; EU; UN), generic words of an organisation's name may be left out
(Federation, Association, Inc), a surname stands for the person, an initial for a first
name ("J. Smith"), and initials for a multiword name ("FIFA", "WHO") either way. Accents
are ignored ("Zurich" is "Zürich"). A name with any other word the source never writes is
not stated.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cached_property

# the usual short and long forms of a few names, read as one word: (pattern, the word)
_ALIASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, flags), word) for pattern, flags, word in (
        (r"\bunited\s+states(?:\s+of\s+america)?\b", re.IGNORECASE, "alias_us"),
        (r"(?<![\w.])U\.\s?S\.(?:\s?A\.)?|\bU\.S\b|\bUSA?\b", 0, "alias_us"),
        (r"\bunited\s+kingdom\b|\b(?:great\s+)?britain\b", re.IGNORECASE, "alias_uk"),
        (r"(?<![\w.])U\.\s?K\.|\bUK\b", 0, "alias_uk"),
        (r"\beuropean\s+union\b", re.IGNORECASE, "alias_eu"),
        (r"(?<![\w.])E\.\s?U\.|\bEU\b", 0, "alias_eu"),
        (r"\bunited\s+nations\b", re.IGNORECASE, "alias_un"),
        (r"(?<![\w.])U\.\s?N\.|\bUN\b", 0, "alias_un"),
    ))
# Words of a name that carry none of it: a name is stated when its other words all are.
FILLER = frozenset(["the", "of", "and", "for", "in", "at", "on", "a", "an", "dr", "mr", "mrs",
                    "ms", "prof", "st", "jr", "sr", "de", "du", "des", "la", "le", "der", "von",
                    "van"])
# Words an organisation's name may be written with or without
GENERIC = frozenset(["federation", "association", "inc", "incorporated", "corporation", "corp",
                     "co", "company", "ltd", "limited", "llc", "plc", "group", "holdings",
                     "foundation", "institute", "society", "organisation", "organization",
                     "club", "fc", "gmbh", "ag", "sa", "committee", "agency", "authority",
                     "department"])
_WORD = re.compile(r"\w+")
_ACRONYM = re.compile(r"^(?:[A-Z]\.?){2,6}$")
# a regnal or ordinal numeral of a name ("World War II", "Henry VIII"): one word, never
# initials; not a middle initial ("John I. Smith")
_NUMERAL = re.compile(r"(?<=\w )(?=[IVX])X{0,3}(?:IX|IV|V?I{0,3})\b(?!\.\s*\w)")
_UPPER_TOKEN = re.compile(r"(?<![\w.])(?:[A-Z]\.){2,6}|\b[A-Z]{2,6}\b")


def fold(text: str) -> str:
    """Lower-cased, NFKC, accents dropped: "Zürich" -> "zurich"."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def name_words(text: str) -> list[str]:
    """The words of ``text`` with the short forms read as one (``alias_us``), folded."""
    for pattern, word in _ALIASES:
        text = pattern.sub(f" {word} ", text)
    return _WORD.findall(fold(text))


class SourceNames:
    """What a source writes of names: its words, its initials and its acronyms."""

    def __init__(self, source: str) -> None:
        self._source = source

    @cached_property
    def _words(self) -> frozenset[str]:
        return frozenset(name_words(self._source))

    @cached_property
    def _plain(self) -> list[str]:
        """The source's words, folded, fillers out: what initials are read from."""
        return [w for w in _WORD.findall(fold(self._source)) if w not in FILLER]

    @cached_property
    def _acronyms(self) -> frozenset[str]:
        return frozenset(m.group().replace(".", "").lower()
                         for m in _UPPER_TOKEN.finditer(self._source))

    @cached_property
    def _text(self) -> str:
        return " ".join(_WORD.findall(fold(self._source)))

    def states(self, name: str) -> bool:
        """True if the source writes ``name`` in any of its usual forms (see the module)."""
        words = [w for w in name_words(name) if w not in FILLER]
        if not words:
            return False
        specific = [w for w in words if w not in GENERIC] or words
        plain = [w for w in _WORD.findall(fold(name)) if w not in FILLER]
        numerals = {m.group().lower() for m in _NUMERAL.finditer(name) if m.group()}
        if numerals and not self._numbered(plain, numerals):
            return False
        if all(w in self._words for w in specific):
            return True
        if _ACRONYM.match(name.strip()):
            return self._spelled(name.strip().replace(".", "").lower())
        letters = "".join(w if w in numerals else w[0] for w in plain)
        if len(plain) >= 2 and letters in self._acronyms:
            return True
        return self._with_initials(plain)

    def _numbered(self, plain: list[str], numerals: set[str]) -> bool:
        """True if the source gives each numeral of a name to the word before it.

        ``plain`` is the name's words, folded, fillers out. "World War I" is not "World
        War II" and "Henry I" not "Henry II", though each "I" reads as an initial; "WWII"
        states "World War II" (its numeral whole).
        """
        for at, word in enumerate(plain):
            if word not in numerals or at == 0:
                continue
            if re.search(rf"\b{re.escape(plain[at - 1])}\W+{word}\b", self._text):
                continue
            letters = "".join(w if w in numerals else w[0] for w in plain[:at + 1])
            if letters not in self._acronyms:
                return False
        return True

    def _spelled(self, letters: str) -> bool:
        """True if consecutive words of the source begin with ``letters`` in order."""
        size = len(letters)
        return any("".join(w[0] for w in self._plain[i:i + size]) == letters
                   for i in range(len(self._plain) - size + 1))

    def _with_initials(self, words: list[str]) -> bool:
        """True if a name written with initials ("j smith") is the source's ("john smith")."""
        if not any(len(w) == 1 for w in words) or all(len(w) == 1 for w in words):
            return False
        pattern = r"\W+".join(rf"{w}\w*" if len(w) == 1 else re.escape(w) for w in words)
        return re.search(rf"\b{pattern}\b", self._text) is not None

"""Two numbers or two names of a sentence in each other's places (issue 64.2).

A sentence can state only values and names its source states and still be wrong: "63
screens in 10,500 territories" where the source has "10,500 screens in 63 territories",
"Leon Yeaman, 28, ... from 55-year-old Phillip Pama" where the source gives 55 to Yeaman
and 28 to Pama, "England will tour South Africa" where South Africa tours England. The
unstated-entity rule passes these (every value is stated), and the embedded model's
reading misses most of them (docs/benchmarks.md, errors by type).

The rule is a swap test, no model and no fitted number. Each sentence's items are its
numbers and the words the source writes as names (capitalised, not a stop word; runs of
them as one name), matched case-insensitively. For two items of one kind, the words
around each (up to ``CONTEXT`` words either side, counted only where they hold a content
word) are looked up in the source, as the sentence has them and with the two exchanged.
The sentence is swapped when exchanging them makes *each* item's surroundings match the
source more often than as written, and the source's matches for the two, exchanged, lie
within ``WINDOW`` words of each other (one statement of the source, not two unrelated
ones). Items of one list ("Brenda and Dave", "May 2 and 3", "Souness, Redknapp and
Henry") are never tested: their order changes no role. A sentence copied from its source
never fires: as written, every one of its surroundings is already the source's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from conli.ner.grounding import normalize

# words (any script, digits kept apart), numbers with their marks ("10,500", "43.3",
# "12:15"), and each other mark alone ("-", ",", "'")
_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+|[^\w\s]")
CONTEXT = 3  # words looked at on each side of an item, to reach a content word
WINDOW = 40  # words: the source's two matches must come from one stretch of it
LONGEST_NAME = 4  # words of a name read as one item
_LISTED = frozenset({"and", "or", "nor", ",", "&", "/", "plus", "as", "well"})


@dataclass(frozen=True)
class Token:
    """One word of a text: lower-cased, with its offsets in the text as written."""

    text: str
    start: int
    end: int


def tokens(text: str) -> list[Token]:
    """``text``'s words and marks, normalised (``ner.grounding.normalize``) one by one."""
    out = []
    for found in _TOKEN.finditer(text):
        word = normalize(found.group())
        if word:
            out.append(Token(word, found.start(), found.end()))
    return out


def _is_number(word: str) -> bool:
    return word[0].isdigit()


def name_runs(text: str, written: Sequence[Token], stop: frozenset[str]
              ) -> frozenset[tuple[str, ...]]:
    """The names ``text`` writes: runs of capitalised words (no stop word), and their parts.

    Every stretch of a run counts ("Rickard" of "Dave Rickard"), so a sentence that names
    a person by the surname alone still has the name as an item.
    """
    runs: list[list[str]] = []
    last = -2
    for at, token in enumerate(written):
        word = text[token.start:token.end]
        if word[:1].isupper() and token.text not in stop and len(word) > 1:
            if last == at - 1:
                runs[-1].append(token.text)
            else:
                runs.append([token.text])
            last = at
    return frozenset(tuple(run[i:j]) for run in runs for i in range(len(run))
                     for j in range(i + 1, min(len(run), i + LONGEST_NAME) + 1))


@dataclass(frozen=True)
class Swap:
    """Two items the sentence has in each other's places, and the source's words for each."""

    first: str  # as the sentence writes it, the earlier of the two
    second: str
    first_in_source: str  # the source's words where it puts ``second`` as ``first`` is put
    second_in_source: str = ""  # empty: ``first_in_source`` holds both places

    @property
    def reason(self) -> str:
        """Why the sentence is flagged, in the source's own words."""
        quoted = f'"{self.first_in_source}"' + (
            f' and "{self.second_in_source}"' if self.second_in_source else "")
        return (f'the source writes {quoted}: this sentence has "{self.first}" and '
                f'"{self.second}" the other way round')


class SourceSwaps:
    """A source read once for the swap test: its words, where each is, and its names."""

    def __init__(self, source: str, stop: frozenset[str]) -> None:
        self._source = source
        self._stop = stop
        self._tokens = tokens(source)
        self._words = [t.text for t in self._tokens]

    @cached_property
    def _at(self) -> dict[str, list[int]]:
        """Each word's positions in the source."""
        where: dict[str, list[int]] = {}
        for at, word in enumerate(self._words):
            where.setdefault(word, []).append(at)
        return where

    @cached_property
    def names(self) -> frozenset[tuple[str, ...]]:
        """The names the source writes (``name_runs``)."""
        return name_runs(self._source, self._tokens, self._stop)

    def _matches(self, words: Sequence[str], anchor: int) -> list[tuple[int, int]]:
        """Where ``words`` occur in the source, found through its word at ``anchor``."""
        out = []
        for at in self._at.get(words[anchor], ()):
            begin = at - anchor
            if begin >= 0 and self._words[begin:begin + len(words)] == list(words):
                out.append((begin, begin + len(words)))
        return out

    def surroundings(self, words: Sequence[str], start: int, end: int
                     ) -> tuple[int, list[tuple[int, int]]]:
        """How many of the item ``words[start:end]``'s surroundings the source has, and where.

        On each side, the item with the fewest words that reach a content word (not a stop
        word, not a mark; at most ``CONTEXT`` words), and with one word more: up to four
        surroundings, each counted when the source has it word for word.
        """
        found = 0
        places: list[tuple[int, int]] = []
        for side in (-1, 1):
            reach = next((k for k in range(1, CONTEXT + 1)
                          if self._content(self._beside(words, start, end, side, k))), None)
            if reach is None:
                continue
            for k in (reach, reach + 1):
                if k > CONTEXT + 1 or (start - k < 0 if side < 0 else end + k > len(words)):
                    continue
                begin, stop = (start - k, end) if side < 0 else (start, end + k)
                hits = self._matches(words[begin:stop], start - begin)
                if hits:
                    found += 1
                    places += hits
        return found, places

    @staticmethod
    def _beside(words: Sequence[str], start: int, end: int, side: int, k: int) -> str:
        """The ``k``-th word before (side -1) or after (side 1) the item; "" past the edge."""
        at = start - k if side < 0 else end + k - 1
        return words[at] if 0 <= at < len(words) else ""

    def _content(self, word: str) -> bool:
        return bool(word) and word[0].isalnum() and word not in self._stop

    def text(self, span: tuple[int, int]) -> str:
        """The source as written over a span of its words."""
        return self._source[self._tokens[span[0]].start:self._tokens[span[1] - 1].end]

    def _quoted(self, first: tuple[int, int], second: tuple[int, int]) -> tuple[str, ...]:
        """The source's words for the two places: one quote where they overlap or touch."""
        if first[0] <= second[1] and second[0] <= first[1]:
            return (self.text((min(first[0], second[0]), max(first[1], second[1]))),)
        return self.text(first), self.text(second)

    def items(self, words: Sequence[str], names: frozenset[tuple[str, ...]] = frozenset()
              ) -> list[tuple[int, int]]:
        """The sentence's numbers and names (spans of ``words``), longest names first.

        A name is one the source writes, or ``names`` (those the sentence itself writes).
        """
        names = self.names | names
        out = []
        at = 0
        while at < len(words):
            if _is_number(words[at]):
                out.append((at, at + 1))
                at += 1
                continue
            for size in range(min(LONGEST_NAME, len(words) - at), 0, -1):
                if tuple(words[at:at + size]) in names:
                    out.append((at, at + size))
                    at += size
                    break
            else:
                at += 1
        return out

    def swap(self, sentence: str) -> Swap | None:
        """The first two items of ``sentence`` it has in each other's places, if any."""
        written = tokens(sentence)
        words = [t.text for t in written]
        items = self.items(words, name_runs(sentence, written, self._stop))
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                if _listed(words, items, a, b):
                    continue  # two items of one list: their order changes no role
                found = self._swapped(words, a, b)
                if found is not None:
                    first, second = found
                    return Swap(sentence[written[a[0]].start:written[a[1] - 1].end],
                                sentence[written[b[0]].start:written[b[1] - 1].end],
                                *self._quoted(first, second))
        return None

    def _swapped(self, words: list[str], a: tuple[int, int], b: tuple[int, int]
                 ) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """The source's spans that state ``a`` and ``b`` exchanged, where the test fires."""
        first, second = words[a[0]:a[1]], words[b[0]:b[1]]
        if _is_number(first[0]) != _is_number(second[0]) or first == second:
            return None
        exchanged = [*words[:a[0]], *second, *words[a[1]:b[0]], *first, *words[b[1]:]]
        moved = len(second) - len(first)
        new_a, new_b = (a[0], a[0] + len(second)), (b[0] + moved, b[0] + moved + len(first))
        as_written_a, _ = self.surroundings(words, *a)
        as_written_b, _ = self.surroundings(words, *b)
        count_a, places_a = self.surroundings(exchanged, *new_a)
        count_b, places_b = self.surroundings(exchanged, *new_b)
        if count_a <= as_written_a or count_b <= as_written_b:
            return None
        return next(((p, q) for p in places_a for q in places_b  # the words before first
                     if abs(p[0] - q[0]) <= WINDOW), None)


def _listed(words: Sequence[str], items: Sequence[tuple[int, int]], a: tuple[int, int],
            b: tuple[int, int]) -> bool:
    """Whether ``a`` and ``b`` are items of one list: only list words, marks and items between."""
    between = set(range(a[1], b[0])) - {at for start, end in items for at in range(start, end)}
    return all(words[at] in _LISTED for at in between)


@lru_cache(maxsize=8)
def swaps_of(source: str, stop: frozenset[str]) -> SourceSwaps:
    """The source read once for the swap test (shared by a check's sentences)."""
    return SourceSwaps(source, stop)


def swapped(sentences: Iterable[str], source: str, stop: frozenset[str]) -> list[Swap | None]:
    """Each sentence's swap against ``source``, or None where it has none."""
    reader = swaps_of(source, stop)
    return [reader.swap(s) for s in sentences]

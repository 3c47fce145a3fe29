"""The prompts' security boundary: caller text enters a prompt as data, never as our markup.

Every variable a caller passes to ``prompts.render`` is data: ``as_data`` defuses each
string in it (in lists and dicts too) before the template sees it, so no template can
forget to. Nothing is removed for its wording: data reaches the model whole (issue 61).
Defusing neutralises our own data tags (every ``</tag>`` a template closes:
``shipped_tags``), chat-template tokens and our ``[ tagged ]`` syntax, and their
look-alikes (``< /claim>``, ``＜/claim＞``, ``【 word 】``: ``LOOK_ALIKES``); text with none
of these is left byte-identical. Only text wrapped in ``Trusted`` (our own markup, built
from defused parts) passes unchanged. With spotlighting on, every piece of data is also
datamarked (``prompts.spotlight``). The ``data`` filter templates still apply
(``data_filter``) is the same defusing (idempotent).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from conli.prompts.spotlight import datamark

TEMPLATE_DIR = Path(__file__).parent / "templates"  # the shipped ones: their tags are defused
_CLOSING_TAG = re.compile(r"</([A-Za-z][\w-]*)>")  # a data tag a template wraps text in
_BRACKET = re.compile(r"[\[\]]")
_WORD_CHAR = re.compile(r"\w")
# Each delimiter the shipped templates use, and the characters a reader could take for it:
# a model reads ＜/claim＞ or 【 word 】 as it reads </claim> or [ word ]. Data tags open with
# < (and / to close), chat-template tokens with < and | or with [, and the entity-level
# prompt tags words with [ ]. ``defuse`` looks for our markup in the text read through this
# table (and full-width letters as ASCII), so a look-alike is defused as the real one is.
# What defusing writes (‹, ［ ］) is listed too, so defused text is left as it is.
LOOK_ALIKES: dict[str, str] = {
    "<": "\uff1c\ufe64\u3008\u2329\u27e8\u276e\u02c2\u1438\u2039",  # ＜﹤〈〈⟨❮˂ᐸ‹
    ">": "\uff1e\ufe65\u3009\u232a\u27e9\u276f\u02c3\u1433\u203a",  # ＞﹥〉〉⟩❯˃ᐳ›
    "/": "\uff0f\u2215\u2044\u29f8",  # ／∕⁄⧸
    "|": "\uff5c\u2223\u01c0",  # ｜∣ǀ
    "[": "\uff3b\u3010\u27e6\u301a\u3014\ufe5d\u2045\u2772",  # ［【⟦〚〔﹝⁅❲
    "]": "\uff3d\u3011\u27e7\u301b\u3015\ufe5e\u2046\u2773",  # ］】⟧〛〕﹞⁆❳
}
_DEFUSED = {"<": "‹", "[": "［", "]": "］"}  # what each opening (and closing bracket) becomes
# the text as a reader takes it, one character for one: look-alikes, and ！..～ as !..~
_READ_AS: dict[int, str] = {
    **{code: chr(code - 0xFEE0) for code in range(0xFF01, 0xFF5F)},
    **{ord(alike): plain for plain, alikes in LOOK_ALIKES.items() for alike in alikes},
}
_ANY_READ_AS = re.compile("[" + re.escape("".join(map(chr, _READ_AS))) + "]")
# what a reader skips between a tag's < and its name: spaces, and characters never shown
_GAP = r"[\s\u200b-\u200d\u2060\ufeff]"
# Chat-template control tokens of the model families we serve, which a tokenizer would read
# as a turn boundary: ChatML / Qwen / Llama 3 / Phi `<|...|>`, DeepSeek's full-width
# `<｜...｜>`, Gemma's turn tags, Llama 2 / Mistral's [INST] family and <s>, Granite
# Guardian's risk-definition block and answer tags.
_TEMPLATE_TOKENS = re.compile(
    r"<(?=[|｜])"
    r"|<(?=/?(?:start_of_turn|end_of_turn|bos|eos|s|pad|unk)>)"
    # Granite Guardian's own blocks and its answer's tags (3.3 answers in <score>)
    r"|<(?=/?(?:start_of_risk_definition|end_of_risk_definition|score|think)>)"
    r"|<(?=<?/?SYS>>)"
    r"|\[(?=/?(?:INST|SYSTEM_PROMPT|TOOL_CALLS|AVAILABLE_TOOLS|TOOL_RESULTS|TOOL_CONTENT)\])",
    re.IGNORECASE,
)


class Trusted(str):
    """Text ``render`` passes into a prompt unchanged: our own markup, never caller text.

    Build it only from defused parts (as ``agents.nli.tag_entity`` does); any string
    operation on it returns a plain ``str``, which is defused again (the safe direction).
    """


class TrustedData(Trusted):
    """Our markup around defused caller text (``[ entity ]`` in a claim).

    ``render`` passes it as it is, but datamarks it when the prompt is spotlit, as all data.
    """


def defuse(text: str, tags: frozenset[str] | None = None, *, brackets: bool = False) -> str:
    """Neutralise our data tags and chat-template tokens (and bracketed words) inside data.

    The opening bracket becomes a look-alike (``‹``, ``［``), so the model still reads the
    text but no tokenizer reads a block boundary or a new chat turn in it. ``tags`` are
    the data tags to defuse (default: every tag the shipped templates close). With
    ``brackets`` (what ``render`` does to every prompt variable) a ``[ ... ]`` pair around
    any letter or digit also becomes ``［ ... ］``, so no caller text tags words as our
    entity-level prompt does; without it brackets stay, e.g. in a model's own JSON echoed
    back to it. Look-alikes of each (``LOOK_ALIKES``: ``＜/claim＞``, ``【 word 】``) and a
    tag spaced out (``< /claim>``, ``</ claim>``) are defused alike. Each replacement is
    one character for one, so offsets into the text stay valid; defusing defused text
    changes nothing.
    """
    read = text.translate(_READ_AS) if _ANY_READ_AS.search(text) else text
    marks = {m.start(): "<" for m in _tag_pattern(tags or shipped_tags()).finditer(read)}
    marks |= {m.start(): m.group() for m in _TEMPLATE_TOKENS.finditer(read)}
    if brackets:
        marks |= {at: text[at] for at in _bracket_pairs(text)}  # ASCII pairs as they stand
        if read is not text:  # and the pairs a look-alike is part of
            marks |= {at: read[at] for at in _bracket_pairs(read)}
    if not marks:
        return text
    chars = list(text)
    for at, plain in marks.items():
        chars[at] = _DEFUSED[plain]
    return "".join(chars)


def _bracket_pairs(text: str) -> list[int]:
    """Where each matched ``[ ... ]`` pair holding a letter or digit has its two brackets.

    Pairs are matched as nested brackets are; ``[...]``, ``[ ]`` and unmatched brackets
    are left out. Linear in the text's length, whatever its nesting: each stretch between
    two brackets is searched for a word character once.
    """
    if "[" not in text or "]" not in text:
        return []
    marks = [m.start() for m in _BRACKET.finditer(text)]
    worded = []  # worded[k]: stretches holding a word character before the k-th bracket
    count, previous = 0, 0
    for at in marks:
        count += _WORD_CHAR.search(text, previous, at) is not None
        worded.append(count)
        previous = at + 1
    opened: list[int] = []
    pairs: list[int] = []
    for k, at in enumerate(marks):
        if text[at] == "[":
            opened.append(k)
        elif opened:
            first = opened.pop()
            if worded[k] > worded[first]:
                pairs += [marks[first], at]
    return pairs


@lru_cache(maxsize=1)
def shipped_tags() -> frozenset[str]:
    """Every data tag a shipped template closes (``source``, ``claim``, ``question``, ...)."""
    return frozenset().union(*(tags_of(path) for path in TEMPLATE_DIR.glob("*.jinja")))


def tags_of(path: Path) -> frozenset[str]:
    """The data tags the template at ``path`` closes, lower-cased."""
    return frozenset(t.lower() for t in _CLOSING_TAG.findall(path.read_text(encoding="utf-8")))


@lru_cache(maxsize=32)
def _tag_pattern(tags: frozenset[str]) -> re.Pattern[str]:
    """``<`` opening one of ``tags`` (``<claim``, ``</source``), or a spaced-out one.

    Spaced out (``< /claim>``, ``</ claim>``, ``< claim id="1">``) it must close on its
    line, so ``x < source`` in prose stays as it is.
    """
    names = "|".join(re.escape(t) for t in sorted(tags, key=len, reverse=True))
    spaced = rf"{_GAP}*+/?{_GAP}*+(?:{names})\b[^<>\n]{{0,80}}+>"
    return re.compile(rf"<(?:/?(?:{names})\b|{spaced})", re.IGNORECASE)


def as_data(value: Any, tags: frozenset[str] | None = None, *, name: str = "value",
            spotlight: bool = False) -> Any:
    """``value`` with every string in it defused, brackets too (lists and dicts walked).

    With ``spotlight`` each string is datamarked too (``prompts.spotlight``).
    ``Trusted`` strings, numbers, booleans and None pass as they are; any other type is
    refused, since it could not be defused and a template would print it verbatim.
    """
    if isinstance(value, TrustedData) and spotlight:
        return Trusted(datamark(value))
    if isinstance(value, Trusted) or value is None or isinstance(value, int | float):
        return value
    if isinstance(value, str):
        defused = defuse(value, tags, brackets=True)
        return datamark(defused) if spotlight else defused
    if isinstance(value, list | tuple):
        return [as_data(item, tags, name=name, spotlight=spotlight) for item in value]
    if isinstance(value, Mapping):
        return {key: as_data(item, tags, name=f"{name}.{key}", spotlight=spotlight)
                for key, item in value.items()}
    raise TypeError(f"prompt variable {name} is a {type(value).__name__}: pass str, numbers, "
                    "lists or dicts (or Trusted for our own markup)")


def data_filter(tags: frozenset[str]) -> Any:
    """The ``data`` filter templates apply: ``defuse`` with brackets; ``Trusted`` as it is."""

    def data(value: Any) -> Any:
        return value if isinstance(value, Trusted) else defuse(value, tags, brackets=True)

    return data

"""Turn user bytes into checkable text, or refuse with a clear error before any model call.

``validate_text`` is the one check every front door (CLI, batch, service, eval, library)
applies to a source or response, so a text one door refuses, every door refuses. The points
a response must cover (seed 001) are read here too: a JSON list of strings, or perspectives
``{"name": [points]}`` (a list is one perspective called ``points``), each point checked as
a source is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from conli.errors import EmptyInputError, EncodingError, InputError, InputTooLargeError

# C0 controls other than tab, newline, vertical tab, form feed and carriage return, and
# DEL: no prose contains them, and a terminal or a model would act on them as commands.
_CONTROL = re.compile(r"[\x01-\x08\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# The setting that raises each text's limit, named in the refusal (points have a fixed one).
LIMIT_SETTINGS = {"source": "CONLI_MAX_SOURCE_CHARS", "question": "CONLI_MAX_SOURCE_CHARS",
                  "response": "CONLI_MAX_RESPONSE_CHARS"}


def decode_text(data: bytes, *, name: str) -> str:
    """Strict UTF-8 (a BOM is allowed); NUL bytes mean binary, which we refuse."""
    if b"\x00" in data:
        raise EncodingError(f"{name} looks binary (it contains NUL bytes); give UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EncodingError(
            f"{name} is not valid UTF-8 (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); "
            "convert it, e.g. iconv -f latin1 -t utf-8"
        ) from exc


def read_input(path: str, name: str) -> str:
    """Read a file (``-`` is stdin) as strict UTF-8, for a command-line front door."""
    import sys
    from pathlib import Path

    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {name} file {path!r}: {exc.strerror}") from exc
    return decode_text(data, name=name)


def validate_text(text: object, *, name: str, max_chars: int) -> str:
    """Refuse empty, binary-looking, unencodable, control-laden or oversized text.

    Returns the text unchanged: nothing is silently cleaned, so offsets into it hold.
    """
    if text is None:
        raise InputError(f"{name} is missing")
    if not isinstance(text, str):
        raise EncodingError(f"{name} must be text (a string), got {type(text).__name__}")
    if "\x00" in text:
        raise EncodingError(f"{name} contains NUL characters; give plain text")
    surrogate = _SURROGATE.search(text)
    if surrogate:
        raise EncodingError(
            f"{name} is not valid Unicode: a lone surrogate (U+{ord(surrogate.group()):04X}) "
            f"at character {surrogate.start()}"
        )
    control = _CONTROL.search(text)
    if control:
        raise EncodingError(
            f"{name} contains the control character U+{ord(control.group()):04X} at character "
            f"{control.start()}; give plain text"
        )
    if not text.strip():
        raise EmptyInputError(f"{name} is empty")
    if len(text) > max_chars:
        setting = LIMIT_SETTINGS.get(name)
        hint = f"; raise {setting} if you mean it" if setting else ""
        raise InputTooLargeError(
            f"{name} has {len(text):,} characters, over the limit of {max_chars:,}{hint}"
        )
    return text


@dataclass(frozen=True)
class CheckInput:
    """A source and response (and optional question) that passed ``validate_text``.

    Built once by ``check_input`` at the front door that received the texts; the pipeline
    takes only this type, so no text reaches a model unvalidated and none is validated twice.
    """

    source: str
    response: str
    question: str | None = None
    points: dict[str, list[str]] | None = None


def check_input(
    source: object,
    response: object,
    *,
    max_source_chars: int,
    max_response_chars: int,
    question: object = None,
    points: object = None,
) -> CheckInput:
    """Validate the texts of one check; ``InputError`` names the first problem."""
    return CheckInput(
        source=validate_text(source, name="source", max_chars=max_source_chars),
        response=validate_text(response, name="response", max_chars=max_response_chars),
        question=None if question is None else validate_text(
            question, name="question", max_chars=max_source_chars
        ),
        points=None if points is None else parse_points(points),
    )


# --- points --------------------------------------------------------------------------------

Points = dict[str, list[str]]
DEFAULT_PERSPECTIVE = "points"
MAX_POINTS = 200
MAX_POINT_CHARS = 2_000


def parse_points(data: object, *, name: str = "points") -> Points:
    """Validate points given as a list of strings or ``{perspective: [strings]}``.

    Every point passes the same text check as a source; an empty list, an empty
    perspective or more than ``MAX_POINTS`` points is refused, nothing is dropped.
    """
    if isinstance(data, list):
        data = {DEFAULT_PERSPECTIVE: data}
    if not isinstance(data, dict):
        raise InputError(f"{name} must be a JSON list of strings or an object of lists, "
                         f"got {type(data).__name__}")
    if not data:
        raise EmptyInputError(f"{name} is empty")
    points: Points = {}
    for perspective, items in data.items():
        label = validate_text(perspective, name=f"{name} perspective name", max_chars=200)
        if not isinstance(items, list):
            raise InputError(f"{name}[{label!r}] must be a list of strings")
        if not items:
            raise EmptyInputError(f"{name}[{label!r}] is empty")
        points[label] = [validate_text(item, name=f"{name}[{label!r}][{i}]",
                                       max_chars=MAX_POINT_CHARS) for i, item in enumerate(items)]
    total = sum(len(items) for items in points.values())
    if total > MAX_POINTS:
        raise InputTooLargeError(f"{name} has {total} points, over the limit of {MAX_POINTS}")
    return points


def read_points(text: str, *, name: str = "points") -> Points:
    """Parse a points file's text (JSON)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc
    return parse_points(data, name=name)


def point_list(points: Mapping[str, list[str]]) -> list[tuple[str, int, str]]:
    """(perspective, index, text) of every point, in order."""
    return [(p, i, text) for p, items in points.items() for i, text in enumerate(items)]

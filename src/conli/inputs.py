"""Turn user bytes into checkable text, or refuse with a clear error before any model call."""

from __future__ import annotations

from conli.errors import EmptyInputError, EncodingError, InputTooLargeError


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


def validate_text(text: str, *, name: str, max_chars: int) -> str:
    """Refuse empty, whitespace-only, binary-looking or oversized text; return it unchanged."""
    if not isinstance(text, str):
        raise EncodingError(f"{name} must be text (str), got {type(text).__name__}")
    if "\x00" in text:
        raise EncodingError(f"{name} contains NUL characters; give plain text")
    if not text.strip():
        raise EmptyInputError(f"{name} is empty")
    if len(text) > max_chars:
        raise InputTooLargeError(
            f"{name} has {len(text):,} characters, over the limit of {max_chars:,}; "
            f"raise CONLI_MAX_{name.upper()}_CHARS if you mean it"
        )
    return text

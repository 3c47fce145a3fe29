"""The opening of a JSON answer that a schema leaves the model no choice about.

Under constrained decoding every token the grammar forces still costs one decoding step,
about three times the cost of the same token in a prefill. For our answers the opening
(``{"judgements": [{"id": 0, "evidence": "``, some 14 tokens) is forced, so a backend that
continues a trailing assistant message can prefill it instead of generating it.
"""

from __future__ import annotations

import json
from typing import Any


def forced_prefix(schema: dict[str, Any]) -> str:
    """JSON text every answer valid under ``schema`` starts with, in our spacing; may be ''.

    Follows the first property of each object (only when every property is required, so
    the order is fixed), the first item of arrays that need one, and single-value enums,
    and stops inside the first string it opens. Anything else ends the prefix early,
    which is always safe: a shorter prefix only means more tokens are generated.
    """
    text, _ = _walk(schema, schema)
    return text


def _walk(node: dict[str, Any], root: dict[str, Any]) -> tuple[str, bool]:
    """(prefix of ``node``'s value, whether that value is complete)."""
    node = _resolve(node, root)
    values = node.get("enum", [node["const"]] if "const" in node else None)
    if values is not None:
        return (json.dumps(values[0]), True) if len(values) == 1 else ("", False)
    kind = node.get("type")
    if kind == "string" and not {"pattern", "format"} & node.keys():
        return '"', False
    if kind == "array" and node.get("minItems", 0) >= 1 and isinstance(node.get("items"), dict):
        text, _ = _walk(node["items"], root)
        return "[" + text, False
    if kind == "object":
        return _walk_object(node, root)
    return "", False


def _walk_object(node: dict[str, Any], root: dict[str, Any]) -> tuple[str, bool]:
    properties: dict[str, Any] = node.get("properties", {})
    if not properties or set(node.get("required", [])) != set(properties):
        return "", False
    text = "{"
    for i, (name, value) in enumerate(properties.items()):
        part, complete = _walk(value, root)
        text += (", " if i else "") + json.dumps(name) + ": " + part
        if not complete:
            return text, False
    return text + "}", True


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return node
    resolved: dict[str, Any] = root.get("$defs", {})[ref.removeprefix("#/$defs/")]
    return resolved

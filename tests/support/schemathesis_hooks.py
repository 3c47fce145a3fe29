"""Schemathesis hooks for the service fuzz test: the stream route's NDJSON body.

Schemathesis draws each request body from the route's schema (one NDJSON line's schema);
sent as that one line, it exercises the opening-line validation of ``/v1/check/stream``.
"""

import json
from typing import Any

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx: Any, value: Any) -> bytes:
    """One generated document as one NDJSON line."""
    return json.dumps(value).encode() + b"\n"

"""One request: the validated texts of one check and the caller's per-call options.

Every front door (``conli check`` and ``judge``, the service, batch, the hook, the library's
``Checker.check``) parses its wire format into ``Request``s here, so the texts' limits are
checked in this one place (``inputs.check_input``), then calls ``Checker.run`` once each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conli.config import Settings
from conli.run.inputs import CheckInput, check_input
from conli.run.plan import RunOptions


@dataclass(frozen=True)
class Request:
    """A check's texts, validated (``CheckInput``), and its per-call ``RunOptions``."""

    texts: CheckInput
    options: RunOptions = field(default_factory=RunOptions)

    @classmethod
    def of(cls, source: object, response: object, *, limits: Settings,
           question: object = None, points: object = None,
           options: RunOptions | None = None) -> Request:
        """Validate the texts within ``limits``' character limits; ``InputError`` if unusable."""
        texts = check_input(source, response, question=question, points=points,
                            name_key=limits.source_name_key,
                            max_source_chars=limits.max_source_chars,
                            max_response_chars=limits.max_response_chars)
        return cls(texts, options if options is not None else RunOptions())
